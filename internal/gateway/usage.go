package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// usageWriter records requests' usage in batches, off the request path: one transaction per
// batch instead of one per request.
type usageWriter struct {
	st   store.Store
	log  *slog.Logger
	in   chan *store.Usage
	done chan struct{}

	mu     sync.RWMutex // guards closed against add racing close
	closed bool
}

const (
	usageBatch = 256
	usageEvery = 100 * time.Millisecond
)

func newUsageWriter(st store.Store, log *slog.Logger) *usageWriter {
	u := &usageWriter{st: st, log: log, in: make(chan *store.Usage, 4096), done: make(chan struct{})}
	go u.run()
	return u
}

func (u *usageWriter) add(rec *store.Usage) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	if u.closed {
		// Only a request still running after a forced shutdown gets here.
		u.log.Error("usage record after shutdown: not recorded", logRequestID, rec.RequestID)
		return
	}
	u.in <- rec
}

// close writes what is left and stops the writer.
func (u *usageWriter) close() {
	u.mu.Lock()
	if !u.closed {
		u.closed = true
		close(u.in)
	}
	u.mu.Unlock()
	<-u.done
}

func (u *usageWriter) run() {
	defer close(u.done)
	batch := make([]*store.Usage, 0, usageBatch)
	t := time.NewTicker(usageEvery)
	defer t.Stop()
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := u.st.InsertUsage(ctx, batch); err != nil {
			u.log.Error("record usage", "records", len(batch), "err", err)
		}
		cancel()
		batch = batch[:0]
	}
	for {
		select {
		case rec, ok := <-u.in:
			if !ok {
				flush()
				return
			}
			batch = append(batch, rec)
			if len(batch) == usageBatch {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}

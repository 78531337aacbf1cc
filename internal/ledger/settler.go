package ledger

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/shareai/shareai/internal/store"
)

// maxBatch bounds the settlements committed in one transaction.
const maxBatch = 256

// settler commits settlements in batches: whoever is waiting when a commit ends goes into the
// next one, so under load many settlements share a transaction (and a disk flush), while a
// lone settlement commits at once. Each settlement stays atomic on its own.
type settler struct {
	st  store.Store
	log *slog.Logger
	in  chan *pending

	mu     sync.RWMutex // guards closed against settle racing close
	closed bool
	done   chan struct{}
}

type pending struct {
	s   *store.Settlement
	err chan error
}

func newSettler(st store.Store, log *slog.Logger) *settler {
	s := &settler{st: st, log: log, in: make(chan *pending, 4*maxBatch), done: make(chan struct{})}
	go s.run()
	return s
}

var errClosed = errors.New("ledger closed")

func (s *settler) settle(ctx context.Context, st *store.Settlement) error {
	p := &pending{s: st, err: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return errClosed
	}
	s.in <- p
	s.mu.RUnlock()
	// Once queued, the settlement commits whether or not the caller waits.
	select {
	case err := <-p.err:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *settler) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.in)
	}
	s.mu.Unlock()
	<-s.done
}

func (s *settler) run() {
	defer close(s.done)
	batch := make([]*pending, 0, maxBatch)
	list := make([]*store.Settlement, 0, maxBatch)
	for p := range s.in {
		batch = append(batch[:0], p)
	drain:
		for len(batch) < maxBatch {
			select {
			case p, ok := <-s.in:
				if !ok {
					break drain
				}
				batch = append(batch, p)
			default:
				break drain
			}
		}
		list = list[:0]
		for _, p := range batch {
			list = append(list, p.s)
		}
		errs := s.st.Settle(context.Background(), list)
		for i, p := range batch {
			if errs[i] != nil && !errors.Is(errs[i], store.ErrClosed) {
				s.log.Error("settle request", "request_id", p.s.RequestID, "err", errs[i])
			}
			p.err <- errs[i]
		}
	}
}

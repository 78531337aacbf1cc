package ledger

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// maxBatch bounds the items committed in one transaction.
const maxBatch = 256

// batcher commits items in batches: whoever is waiting when a commit ends goes into the next
// one, so under load many items share a transaction (and a disk flush), while a lone item
// commits at once. The store keeps each item atomic on its own.
//
// With linger set, a batch of queued items alone (no caller waits for any of them) waits up
// to linger for more to join it, a group commit: at low load a commit and its WAL frames
// serve several requests instead of one. An item a caller waits for (do) ends the wait.
type batcher[T any] struct {
	commit func(ctx context.Context, items []T) []error
	in     chan *waiting[T]
	linger time.Duration

	mu     sync.RWMutex // guards closed against do racing close
	closed bool
	done   chan struct{}
}

type waiting[T any] struct {
	item T
	err  chan error  // for do
	done func(error) // for queue
}

func newBatcher[T any](commit func(ctx context.Context, items []T) []error, linger time.Duration) *batcher[T] {
	b := &batcher[T]{commit: commit, in: make(chan *waiting[T], 4*maxBatch), linger: linger, done: make(chan struct{})}
	go b.run()
	return b
}

var errClosed = errors.New("ledger closed")

// do commits item with the next batch and returns its error. Once queued, the item commits
// whether or not the caller still waits.
func (b *batcher[T]) do(ctx context.Context, item T) error {
	w := &waiting[T]{item: item, err: make(chan error, 1)}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return errClosed
	}
	b.in <- w
	b.mu.RUnlock()
	select {
	case err := <-w.err:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// queue commits item with the next batch and returns at once; done gets its error.
func (b *batcher[T]) queue(item T, done func(error)) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		done(errClosed)
		return
	}
	b.in <- &waiting[T]{item: item, done: done}
}

// isClosed says whether close was called.
func (b *batcher[T]) isClosed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.closed
}

// close commits what is queued and stops.
func (b *batcher[T]) close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.in)
	}
	b.mu.Unlock()
	<-b.done
}

func (b *batcher[T]) run() {
	defer close(b.done)
	batch := make([]*waiting[T], 0, maxBatch)
	items := make([]T, 0, maxBatch)
	for w := range b.in {
		batch = append(batch[:0], w)
	drain:
		for len(batch) < maxBatch {
			select {
			case w, ok := <-b.in:
				if !ok {
					break drain
				}
				batch = append(batch, w)
			default:
				break drain
			}
		}
		if b.linger > 0 && len(batch) < maxBatch && !slices.ContainsFunc(batch, (*waiting[T]).waited) {
			batch = b.gather(batch)
		}
		items = items[:0]
		for _, w := range batch {
			items = append(items, w.item)
		}
		errs := b.commit(context.Background(), items)
		for i, w := range batch {
			if w.done != nil {
				w.done(errs[i])
			} else {
				w.err <- errs[i]
			}
		}
	}
}

// waited says whether a caller waits for the item's commit.
func (w *waiting[T]) waited() bool { return w.done == nil }

// gather adds to batch what comes within linger, until it is full, an item that a caller
// waits for comes, or the batcher closes.
func (b *batcher[T]) gather(batch []*waiting[T]) []*waiting[T] {
	t := time.NewTimer(b.linger)
	defer t.Stop()
	for len(batch) < maxBatch {
		select {
		case w, ok := <-b.in:
			if !ok {
				return batch
			}
			batch = append(batch, w)
			if w.waited() {
				return batch
			}
		case <-t.C:
			return batch
		}
	}
	return batch
}

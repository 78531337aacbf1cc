package ledger

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// commits records the batches a batcher commits.
type commits struct {
	mu      sync.Mutex
	batches [][]int
}

func (c *commits) commit(_ context.Context, items []int) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, slices.Clone(items))
	return make([]error, len(items))
}

func (c *commits) got() [][]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.batches)
}

// Queued items wait for others to share their commit; an item a caller waits for ends the
// wait and commits with them.
func TestBatcher_GroupCommit(t *testing.T) {
	var c commits
	b := newBatcher(c.commit, time.Hour) // only a waited item or close ends the wait
	defer b.close()
	var queued sync.WaitGroup
	for i := range 3 {
		queued.Add(1)
		b.queue(i, func(err error) {
			if err != nil {
				t.Error(err)
			}
			queued.Done()
		})
	}
	if err := b.do(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	queued.Wait()
	if got := c.got(); len(got) != 1 || !slices.Equal(got[0], []int{0, 1, 2, 3}) {
		t.Errorf("commits %v; want the three queued items and the waited one in one", got)
	}
}

// Close commits what is waiting for its group commit before it returns.
func TestBatcher_CloseCommitsTheWaiting(t *testing.T) {
	var c commits
	b := newBatcher(c.commit, time.Hour)
	var done []int
	var mu sync.Mutex
	for i := range 2 {
		b.queue(i, func(error) { mu.Lock(); done = append(done, i); mu.Unlock() })
	}
	b.close()
	if got := c.got(); len(got) != 1 || !slices.Equal(got[0], []int{0, 1}) || len(done) != 2 {
		t.Errorf("commits %v, %d told; want both queued items committed in one, and told", got, len(done))
	}
}

// Without a linger a lone queued item commits at once: its commit does not wait for more.
func TestBatcher_NoLinger(t *testing.T) {
	var c commits
	b := newBatcher(c.commit, 0)
	defer b.close()
	committed := make(chan struct{})
	b.queue(7, func(error) { close(committed) })
	<-committed // with a linger it would wait for company (an hour in the tests above)
	if got := c.got(); len(got) != 1 || !slices.Equal(got[0], []int{7}) {
		t.Errorf("commits %v", got)
	}
}

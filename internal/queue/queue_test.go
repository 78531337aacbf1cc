package queue

import (
	"errors"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/tier"
)

var now = time.Unix(1_700_000_000, 0)

func all(int) bool { return true }

// A freed slot goes to gold first, then to a continuation of its tier, then by arrival.
func TestQueue_Order(t *testing.T) {
	q := New[int, int](Config{})
	join := func(tr tier.Tier, cont bool) *Ticket[int, int] {
		tk, err := q.Join("m", "k", tr, cont, all, now)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	silver1 := join(tier.Silver, false)
	bronze := join(tier.Bronze, false)
	silver2 := join(tier.Silver, false)
	silverCont := join(tier.Silver, true)
	gold := join(tier.Gold, false)
	want := []*Ticket[int, int]{gold, silverCont, silver1, silver2, bronze}
	for i, tk := range want {
		if !q.Hand("m", i, i) {
			t.Fatalf("slot %d not taken", i)
		}
		select {
		case s := <-tk.Ready():
			if s != i {
				t.Errorf("waiter %d got slot %d", i, s)
			}
		default:
			t.Fatalf("waiter %d (tier %v, continuation %v) was not served %d-th", i, tk.Tier, tk.Continuation, i)
		}
	}
	if q.Hand("m", 9, 9) {
		t.Error("an empty line took a slot")
	}
	if q.Len("m") != 0 || len(q.keys) != 0 {
		t.Errorf("left %d waiting, keys %v", q.Len("m"), q.keys)
	}
}

// A slot goes to the first waiter it fits, not merely the first.
func TestQueue_HandFits(t *testing.T) {
	q := New[int, int](Config{})
	even, _ := q.Join("m", "k", tier.Gold, false, func(s int) bool { return s%2 == 0 }, now)
	anyTk, _ := q.Join("m", "k", tier.Silver, false, all, now)
	if !q.Hand("m", 1, 1) {
		t.Fatal("odd slot not taken")
	}
	if s, ok := anyTk.Leave(); !ok || s != 1 {
		t.Errorf("the waiter it fits got %d, %v", s, ok)
	}
	if _, ok := even.Leave(); ok {
		t.Error("the gold waiter that wants even slots got one")
	}
	if q.Hand("m", 2, 2) {
		t.Error("a waiter that left took a slot")
	}
}

func TestQueue_Bounds(t *testing.T) {
	q := New[int, int](Config{Length: 3, PerKey: 2})
	q.Join("m", "a", tier.Silver, false, all, now)
	q.Join("m", "a", tier.Silver, false, all, now)
	_, err := q.Join("other", "a", tier.Silver, false, all, now)
	if fe, ok := errors.AsType[*Full](err); !ok || !fe.Key {
		t.Errorf("a key's third waiter: %v; want the key's bound", err)
	}
	if _, err := q.Join("m", "b", tier.Silver, false, all, now); err != nil {
		t.Fatal(err)
	}
	_, err = q.Join("m", "c", tier.Gold, false, all, now)
	if fe, ok := errors.AsType[*Full](err); !ok || fe.Key || fe.Limit != 3 {
		t.Errorf("the model's fourth waiter: %v; want the model's bound", err)
	}
	if got := q.Waiting()[tier.Silver]; got != 3 {
		t.Errorf("waiting %d", got)
	}
}

// Leave after a hand returns the slot, so that it is used or freed, never lost.
func TestQueue_LeaveAfterHand(t *testing.T) {
	q := New[int, int](Config{})
	tk, _ := q.Join("m", "k", tier.Silver, false, all, now)
	if tk.Ahead() != 0 {
		t.Errorf("ahead %d", tk.Ahead())
	}
	q.Hand("m", 7, 7)
	if tk.Ahead() != -1 {
		t.Error("a served ticket is still in line")
	}
	if s, ok := tk.Leave(); !ok || s != 7 {
		t.Errorf("Leave = %d, %v; want the slot handed", s, ok)
	}
	if _, ok := tk.Leave(); ok {
		t.Error("a second Leave returned the slot again")
	}
	q.Close()
	if _, err := q.Join("m", "k", tier.Silver, false, all, now); !errors.Is(err, ErrClosed) {
		t.Errorf("Join after Close: %v", err)
	}
}

// A batch line's continuation waits after every live request, bronze ones too, and is not
// counted as a live waiter.
func TestQueue_BatchLast(t *testing.T) {
	q := New[int, int](Config{})
	b, err := q.JoinBatch("m", "batch:a", all, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Live("m"); got != 0 {
		t.Errorf("live waiters %d with only a batch line waiting, want 0", got)
	}
	bronze, err := q.Join("m", "k", tier.Bronze, false, all, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Live("m"); got != 1 {
		t.Errorf("live waiters %d, want 1", got)
	}
	for i, tk := range []*Ticket[int, int]{bronze, b} {
		if !q.Hand("m", i, i) {
			t.Fatalf("slot %d not taken", i)
		}
		select {
		case <-tk.Ready():
		default:
			t.Fatalf("waiter %d (batch %v) not served %d-th", i, tk.Batch, i)
		}
	}
}

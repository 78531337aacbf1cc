package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A request the caller tracks (Track) and the core then serves is one context, which Abort
// ends with ErrShuttingDown, and Wait covers until both have released it.
func TestAbortable_TrackedThenServed(t *testing.T) {
	c := &Core{}
	c.stopping, c.stopAll = context.WithCancelCause(context.Background())
	outer, _, releaseOuter := c.Track(context.Background())
	inner, _, releaseInner := c.abortable(outer)
	if inner != outer {
		t.Error("serving a tracked request wrapped its context again")
	}
	other, _, releaseOther := c.abortable(context.Background()) // a request nobody tracked
	if other == outer {
		t.Error("an untracked request got another's context")
	}
	releaseOther()

	c.Abort()
	select {
	case <-inner.Done():
		if cause := context.Cause(inner); !errors.Is(cause, ErrShuttingDown) {
			t.Errorf("cause %v; want ErrShuttingDown", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Abort did not end the request's context")
	}
	waiting := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return c.Wait(ctx) != nil
	}
	releaseInner()
	if !waiting() {
		t.Error("Wait returned while the caller still tracked the request")
	}
	releaseOuter()
	if waiting() {
		t.Error("Wait still waits with every request released")
	}
}

// The cancel Track returns ends the request's context with its cause, as Serve sees it: the
// caller's own reason (its buyer went away) needs no layer of its own.
func TestTrack_Cancel(t *testing.T) {
	c := &Core{}
	c.stopping, c.stopAll = context.WithCancelCause(context.Background())
	outer, cancel, releaseOuter := c.Track(context.Background())
	defer releaseOuter()
	inner, _, releaseInner := c.abortable(outer)
	defer releaseInner()
	gone := errors.New("buyer gone")
	cancel(gone)
	select {
	case <-inner.Done():
		if cause := context.Cause(inner); cause != gone {
			t.Errorf("cause %v; want the caller's", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Track's cancel did not end the served request's context")
	}
}

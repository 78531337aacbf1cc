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
	outer, releaseOuter := c.Track(context.Background())
	inner, releaseInner := c.abortable(outer)
	if inner != outer {
		t.Error("serving a tracked request wrapped its context again")
	}
	other, releaseOther := c.abortable(context.Background()) // a request nobody tracked
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

package sim

import (
	"context"
	"errors"
	"github.com/shareai/shareai/internal/engine"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shareai/shareai/internal/protocol"
)

func TestRun_Pacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Config{TTFT: 2 * time.Second, TokensPerSecond: 10})
		start := time.Now()
		var at []time.Duration
		_, err := e.Run(t.Context(), user("Pace me.", 1), engine.Emit(func(protocol.Delta) error {
			at = append(at, time.Since(start))
			return nil
		}))
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		for i, got := range at {
			if want := 2*time.Second + time.Duration(i)*100*time.Millisecond; got != want {
				t.Fatalf("delta %d at %v, want %v", i, got, want)
			}
		}
		if got, want := time.Since(start), 2*time.Second+time.Duration(len(at)-1)*100*time.Millisecond; got != want {
			t.Errorf("Run took %v, want %v", got, want)
		}

		// An empty answer still waits for its first token.
		start = time.Now()
		req := user("Pace me.", 1)
		req.Stop = []string{e.Answer(req)[:3]}
		if _, err := e.Run(t.Context(), req, engine.Emit(func(protocol.Delta) error { return nil })); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("empty answer took %v, want 2s", got)
		}
	})
}

func TestRun_Cancel(t *testing.T) {
	const ttft, gap = 2 * time.Second, 100 * time.Millisecond
	tests := []struct {
		name       string
		ctx        func(context.Context) (context.Context, context.CancelFunc) // of the run
		cancelAt   int                                                         // cancel from emit after this many deltas; -1 never
		wantDeltas int
		wantErr    error
		wantTime   time.Duration
	}{
		{"during TTFT", func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			go func() { time.Sleep(500 * time.Millisecond); cancel() }()
			return ctx, cancel
		}, -1, 0, context.Canceled, 500 * time.Millisecond},
		{"deadline mid-stream", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, ttft+2*gap+gap/2)
		}, -1, 3, context.DeadlineExceeded, ttft + 2*gap + gap/2},
		{"cancelled from emit", context.WithCancel, 3, 3, context.Canceled, ttft + 2*gap},
		{"cancelled before", func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx, cancel
		}, -1, 0, context.Canceled, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := New(Config{TTFT: ttft, TokensPerSecond: float64(time.Second / gap)})
				ctx, cancel := tt.ctx(t.Context())
				defer cancel()
				start := time.Now()
				n := 0
				_, err := e.Run(ctx, user("Cancel me.", 1), engine.Emit(func(protocol.Delta) error {
					n++
					if n == tt.cancelAt {
						cancel()
					}
					return nil
				}))
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Run error = %v, want %v", err, tt.wantErr)
				}
				if n != tt.wantDeltas {
					t.Errorf("%d deltas, want %d", n, tt.wantDeltas)
				}
				if got := time.Since(start); got != tt.wantTime {
					t.Errorf("Run returned after %v, want %v", got, tt.wantTime)
				}
			})
		})
	}
}

func TestRun_CancelWithoutDelays(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := New(Config{}).Run(ctx, user("Cancel me.", 1), engine.Emit(func(protocol.Delta) error {
		n++
		if n == 2 {
			cancel()
		}
		return nil
	}))
	if !errors.Is(err, context.Canceled) || n != 2 {
		t.Errorf("Run = %v after %d deltas, want %v after 2", err, n, context.Canceled)
	}
}

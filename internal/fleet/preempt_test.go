package fleet_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// A node that ignores the cancel of a preempted bronze job keeps no slot from gold: after
// PreemptGrace the coordinator ends the job itself, gold gets the slot, and the bronze answer
// continues exactly.
func TestPreempt_NodeIgnoresCancel(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const model = "hand/stubborn"
	h, err := env.DialHostile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reg := honestRegister(model)
	reg.Offers[0].Continues = true
	if _, err := h.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	jobs := make(chan string, 3)
	go answer(ctx, h, func(job string, i int) []protocol.Frame {
		jobs <- job
		switch i {
		case 0: // the bronze job: a first piece, then nothing, whatever the coordinator says
			return []protocol.Frame{{Type: protocol.TypeDelta, Job: job, Delta: &protocol.Delta{Text: "Once upon", Pieces: 2}}}
		case 1:
			return text(job, "Gold.", 1)
		}
		return text(job, " a time.", 3) // the bronze continuation
	})

	bronze := env.Post("/chat/completions", `{"model":"`+model+`","stream":true,"service_tier":"flex","messages":[{"role":"user","content":"A story."}]}`)
	defer bronze.Body.Close()
	if bronze.StatusCode != http.StatusOK {
		t.Fatalf("bronze: %d", bronze.StatusCode)
	}
	<-jobs
	start := time.Now()
	gold := env.Post("/chat/completions", `{"model":"`+model+`","service_tier":"priority","messages":[{"role":"user","content":"Now."}]}`)
	gold.Body.Close()
	if gold.StatusCode != http.StatusOK {
		t.Fatalf("gold: %d", gold.StatusCode)
	}
	if waited := time.Since(start); waited < fleet.PreemptGrace-100*time.Millisecond {
		t.Errorf("gold served after %v, before the grace of a preempted node (%v)", waited, fleet.PreemptGrace)
	}
	var got strings.Builder
	sc := bufio.NewScanner(bronze.Body)
	for sc.Scan() {
		if c, ok := strings.CutPrefix(sc.Text(), `data: {`); ok && strings.Contains(c, `"content":"`) {
			_, after, _ := strings.Cut(c, `"content":"`)
			piece, _, _ := strings.Cut(after, `"`)
			got.WriteString(piece)
		}
	}
	if got.String() != "Once upon a time." {
		t.Errorf("bronze answer %q; want its first piece and the continuation, whole", got.String())
	}
}

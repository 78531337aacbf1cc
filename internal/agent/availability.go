package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/shareai/shareai/internal/protocol"
)

// Schedule is when a node takes jobs: its owner's weekly availability windows.
type Schedule interface {
	Open(t time.Time) bool
	String() string
}

// errSteppedAside cancels the jobs still running when the drain deadline of a pause passes:
// the coordinator has another node finish their answers.
var errSteppedAside = errors.New("node stepped aside")

// Paused says why the node takes no new jobs now, or "" when it does.
func (a *Agent) Paused() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.paused
}

// Pause stops the node taking new jobs until Resume, as its owner asked, even across restarts
// of the agent; running jobs go on for the drain deadline. It returns at once; the coordinator
// hears of it within a moment.
func (a *Agent) Pause() { a.setOwnerPause(true) }

// Resume undoes Pause. The node takes jobs again unless something else still pauses it
// (outside its windows, the GPU in use, too hot).
func (a *Agent) Resume() { a.setOwnerPause(false) }

// pausedFile, in the data directory, says the owner paused the node.
const pausedFile = "paused"

const ownerPauseReason = "paused by its owner"

func (a *Agent) setOwnerPause(p bool) {
	a.mu.Lock()
	a.ownerPaused = p
	a.mu.Unlock()
	path := filepath.Join(a.cfg.DataDir, pausedFile)
	var err error
	if p {
		err = os.WriteFile(path, []byte(a.cfg.Now().UTC().Format(time.RFC3339)+"\n"), 0o600)
	} else if err = os.Remove(path); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		a.log.Warn("cannot record the pause in the data directory: a restart forgets it", "err", err)
	}
	a.check(context.Background(), false)
}

// ownerPausedBefore says whether the owner paused the node before the agent last stopped.
func ownerPausedBefore(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, pausedFile))
	return err == nil
}

// Telemetry returns the node's latest hardware reading, nil when it has none.
func (a *Agent) Telemetry() *protocol.Telemetry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.telemetry
}

// watch reads the hardware and checks the node's windows and guard every CheckEvery until ctx
// is done, pausing and resuming the node as they say.
func (a *Agent) watch(ctx context.Context) {
	t := time.NewTicker(a.cfg.CheckEvery)
	defer t.Stop()
	for {
		a.check(ctx, true)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check decides whether the node takes jobs now. With sample, it first reads the hardware.
// When the node stops or starts taking jobs, the coordinator hears of it at once; when the
// drain deadline of a pause has passed, the jobs still running are handed back.
func (a *Agent) check(ctx context.Context, sample bool) {
	a.checkMu.Lock()
	defer a.checkMu.Unlock()
	now := a.cfg.Now()
	a.mu.Lock()
	reading, running, ran := a.telemetry, a.running, a.ranSince
	a.mu.Unlock()
	if sample && a.cfg.Telemetry != nil {
		sctx, cancel := context.WithTimeout(ctx, a.cfg.CheckEvery)
		t, err := a.cfg.Telemetry(sctx)
		cancel()
		if failing := err != nil; failing != a.readingFails {
			// Without readings the guard cannot see heat or the owner: say so, once.
			a.readingFails = failing
			if failing {
				a.log.Warn("cannot read the GPUs: the temperature and step-aside guard is blind until this is fixed", "err", err)
			} else {
				a.log.Info("reading the GPUs again")
			}
		}
		reading = t
	}
	var guardReason string
	if sample && a.cfg.Guard != nil {
		// A job that ended since the last reading may still show in it: count it as running.
		if st, _ := a.cfg.Guard.Observe(now, reading, max(running, ran)); st.Paused {
			guardReason = st.Reason
		}
		a.mu.Lock()
		a.ranSince = a.running
		a.mu.Unlock()
	} else {
		a.mu.Lock()
		guardReason = a.guardReason
		a.mu.Unlock()
	}

	a.mu.Lock()
	a.telemetry, a.guardReason = reading, guardReason
	reason := a.pauseReason(now)
	changed := reason != a.paused
	if changed && (reason == "") != (a.paused == "") {
		a.pausedAt = now // the drain deadline counts from when the node stopped taking jobs
	}
	a.paused = reason
	drainOver := a.paused != "" && now.Sub(a.pausedAt) >= a.cfg.Drain && a.running > 0
	c := a.conn
	a.mu.Unlock()

	if changed {
		if reason != "" {
			a.log.Info("taking no new jobs", "reason", reason, "running", running, "drain", a.cfg.Drain)
		} else {
			a.log.Info("taking jobs again")
		}
		select {
		case a.kick <- struct{}{}: // the connection sends a heartbeat now
		default:
		}
	}
	if drainOver && c != nil {
		n := c.stepAside()
		a.log.Warn("drain deadline passed: handed running jobs back to the coordinator", "jobs", n, "reason", reason)
	}
}

// pauseReason says why the node must take no new jobs at now, or "". The caller holds mu.
func (a *Agent) pauseReason(now time.Time) string {
	switch {
	case a.ownerPaused:
		return ownerPauseReason
	case a.cfg.Schedule != nil && !a.cfg.Schedule.Open(now):
		return fmt.Sprintf("outside its availability windows (%s)", a.cfg.Schedule)
	}
	return a.guardReason
}

// stepAside cancels the running jobs, which end with an error so that other nodes finish their
// answers, and returns how many there were.
func (c *conn) stepAside() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range c.jobs {
		j.cancel(errSteppedAside)
	}
	return len(c.jobs)
}

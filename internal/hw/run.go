package hw

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Runner runs a command-line tool and returns what it wrote to standard output. [Exec] is the
// real one; tests pass a fake that returns recorded output. When the tool is not installed the
// error wraps exec.ErrNotFound; when it runs and fails (a driver that is not loaded, say) the
// error says so, and discovery moves on to the next vendor either way.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// ExecTimeout bounds one run of a tool by [Exec]: nvidia-smi can hang when a GPU has fallen off
// the bus, and discovery must not hang with it.
const ExecTimeout = 10 * time.Second

// Exec runs the tool on this machine, for at most ExecTimeout.
func Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ExecTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second // do not wait for a child that keeps the pipes open
	if err := cmd.Run(); err != nil {
		// nvidia-smi says why it failed on stdout ("NVIDIA-SMI has failed because ...").
		if msg := firstLine(stderr.String(), stdout.String()); msg != "" {
			return nil, fmt.Errorf("run %s: %w: %s", name, err, msg)
		}
		return nil, fmt.Errorf("run %s: %w", name, err)
	}
	return stdout.Bytes(), nil
}

// firstLine returns the first non-blank line of the first text that has one.
func firstLine(texts ...string) string {
	for _, t := range texts {
		for line := range strings.Lines(t) {
			if line = strings.TrimSpace(line); line != "" {
				return line
			}
		}
	}
	return ""
}

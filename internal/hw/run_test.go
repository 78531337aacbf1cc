package hw

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestExec(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh:", err)
	}
	ctx := context.Background()

	out, err := Exec(ctx, "sh", "-c", "echo 0, GPU-1")
	if err != nil || string(out) != "0, GPU-1\n" {
		t.Errorf("got %q, %v; want the output", out, err)
	}

	_, err = Exec(ctx, "sh", "-c", "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver'; exit 9")
	if err == nil || !strings.Contains(err.Error(), "exit status 9: NVIDIA-SMI has failed") {
		t.Errorf("failing tool: got %v, want its exit status and what it said", err)
	}

	_, err = Exec(ctx, "shareai-no-such-tool")
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing tool: got %v, want an error wrapping exec.ErrNotFound", err)
	}
}

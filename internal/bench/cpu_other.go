//go:build !unix && !windows

package bench

import (
	"errors"
	"runtime"
	"time"
)

func processCPU() (time.Duration, error) {
	return 0, errors.New("bench: cannot read this process's CPU time on " + runtime.GOOS)
}

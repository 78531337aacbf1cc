package bench

import "time"

// ProcessCPU is the CPU time this process has used so far, user and system, on all its
// threads: getrusage(RUSAGE_SELF) on Unix, GetProcessTimes on Windows.
func ProcessCPU() (time.Duration, error) { return processCPU() }

package hw

import (
	"bufio"
	"bytes"
	"context"
	"strings"

	"github.com/shareai/shareai/internal/protocol"
)

// host describes the machine without its GPUs: OS, architecture, CPUs and memory. What it
// cannot read stays zero; that is never an error.
func (p Probe) host(ctx context.Context) protocol.Hardware {
	hw := protocol.Hardware{OS: p.GOOS, Arch: p.GOARCH, CPUs: p.NumCPU}
	switch p.GOOS {
	case "linux":
		hw.MemoryMiB = p.linuxMemoryMiB()
		hw.CPU = p.linuxCPUName()
	case "darwin":
		hw.MemoryMiB, hw.CPU = p.darwinHost(ctx)
	}
	return hw
}

// linuxMemoryMiB reads MemTotal from /proc/meminfo ("MemTotal:  16318412 kB"); 0 when it
// cannot.
func (p Probe) linuxMemoryMiB() int64 {
	kb, ok := parseNumber(p.procField("/proc/meminfo", "MemTotal"))
	if !ok || kb <= 0 || kb > 1<<50 {
		return 0
	}
	return int64(kb) >> 10
}

// linuxCPUName reads the first "model name" from /proc/cpuinfo; "" when there is none (ARM
// kernels do not name the CPU there).
func (p Probe) linuxCPUName() string {
	return p.procField("/proc/cpuinfo", "model name")
}

// procField returns the value of the first "key: value" line of a /proc file with that key,
// or "" when the file cannot be read or has no such line.
func (p Probe) procField(path, key string) string {
	if p.ReadFile == nil {
		return ""
	}
	data, err := p.ReadFile(path)
	if err != nil {
		return ""
	}
	return colonValues(data)[key]
}

// darwinHost reads the memory and the CPU's (or Apple chip's) name with sysctl.
func (p Probe) darwinHost(ctx context.Context) (memoryMiB int64, cpu string) {
	out, err := p.runner()(ctx, "sysctl", "hw.memsize", "machdep.cpu.brand_string")
	if err != nil {
		p.passOver("sysctl", err)
		return 0, ""
	}
	values := colonValues(out)
	if b, ok := parseNumber(values["hw.memsize"]); ok && b > 0 && b < 1<<62 {
		memoryMiB = int64(b) >> 20
	}
	return memoryMiB, values["machdep.cpu.brand_string"]
}

// colonValues reads "key: value" lines (sysctl, /proc/meminfo; /proc/cpuinfo pads keys with
// tabs), keeping the first value of each key.
func colonValues(data []byte) map[string]string {
	values := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key = strings.TrimSpace(key)
		if _, seen := values[key]; !seen {
			values[key] = strings.TrimSpace(value)
		}
	}
	return values
}

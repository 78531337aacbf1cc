package shareai_test

import (
	"bufio"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// distTargets are the platforms of the release binaries; the Makefile's PLATFORMS must list the
// same (TestDistTargets_MatchMakefile).
var distTargets = []struct {
	goos, goarch string
	check        func(t *testing.T, path string)
}{
	{"linux", "amd64", checkELF(elf.EM_X86_64)},
	{"linux", "arm64", checkELF(elf.EM_AARCH64)},
	{"windows", "amd64", checkPE(pe.IMAGE_FILE_MACHINE_AMD64)},
	{"darwin", "amd64", checkMachO(macho.CpuAmd64, false)},
	{"darwin", "arm64", checkMachO(macho.CpuArm64, true)},
}

// TestDist_CrossCompile builds ./cmd/shareai for every release target as `make dist` does
// (CGO_ENABLED=0, -trimpath, -ldflags "-s -w -X main.version=…") and checks that each binary
// is an executable of the right format and architecture, and that the Linux ones are static,
// so they run on any distribution and in a distroless image.
// distBuildMargin is the time a cross-compile may take, at worst, on a cold build cache and
// a busy 2-core machine.
const distBuildMargin = 4 * time.Minute

func TestDist_CrossCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: cross-compiles ./cmd/shareai for five targets, minutes on a cold build cache")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	const version = "v0.0.0-disttest"
	dir := t.TempDir()
	// One build at a time: each is already parallel inside, and modernc.org/sqlite is large.
	for _, tt := range distTargets {
		t.Run(tt.goos+"_"+tt.goarch, func(t *testing.T) {
			// A cold build cache on a busy machine takes minutes a target: rather than time the
			// whole `go test ./...` out, leave the targets that no longer fit to .ci/run, which
			// runs this test alone with a longer -timeout.
			if d, ok := t.Deadline(); ok && time.Until(d) < distBuildMargin {
				t.Skipf("less than %v left before the test binary's -timeout: not built", distBuildMargin)
			}
			out := filepath.Join(dir, "shareai_"+tt.goos+"_"+tt.goarch)
			if tt.goos == "windows" {
				out += ".exe"
			}
			cmd := exec.CommandContext(t.Context(), gobin, "build", "-trimpath",
				"-ldflags", "-s -w -X main.version="+version, "-o", out, "./cmd/shareai")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+tt.goos, "GOARCH="+tt.goarch)
			start := time.Now()
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("GOOS=%s GOARCH=%s go build: %v\n%s", tt.goos, tt.goarch, err, b)
			}
			t.Logf("built in %v", time.Since(start).Round(time.Second))
			tt.check(t, out)
			if tt.goos == runtime.GOOS && tt.goarch == runtime.GOARCH {
				b, err := exec.Command(out, "version").CombinedOutput()
				if got, want := strings.TrimSpace(string(b)), "shareai "+version; err != nil || got != want {
					t.Errorf("%s version = %q, %v; want %q", filepath.Base(out), got, err, want)
				}
			}
		})
	}
}

func checkELF(machine elf.Machine) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("not an ELF file: %v", err)
		}
		defer f.Close()
		if f.Class != elf.ELFCLASS64 || f.Machine != machine {
			t.Errorf("ELF %v %v; want ELFCLASS64 %v", f.Class, f.Machine, machine)
		}
		if f.Type != elf.ET_EXEC {
			t.Errorf("ELF type %v; want ET_EXEC (a static, non-PIE executable)", f.Type)
		}
		for _, p := range f.Progs {
			switch p.Type {
			case elf.PT_INTERP:
				t.Error("has a PT_INTERP program header: dynamically linked; want static (CGO_ENABLED=0)")
			case elf.PT_DYNAMIC:
				t.Error("has a PT_DYNAMIC program header: dynamically linked; want static (CGO_ENABLED=0)")
			}
		}
		if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
			t.Errorf("imports libraries %v (%v); want none", libs, err)
		}
	}
}

func checkPE(machine uint16) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		f, err := pe.Open(path)
		if err != nil {
			t.Fatalf("not a PE file: %v", err)
		}
		defer f.Close()
		if f.Machine != machine {
			t.Errorf("PE machine %#x; want %#x", f.Machine, machine)
		}
		if f.Characteristics&pe.IMAGE_FILE_EXECUTABLE_IMAGE == 0 {
			t.Error("PE file is not marked executable")
		}
		oh, ok := f.OptionalHeader.(*pe.OptionalHeader64)
		if !ok {
			t.Fatalf("PE optional header %T; want PE32+ (64-bit)", f.OptionalHeader)
		}
		if oh.Subsystem != pe.IMAGE_SUBSYSTEM_WINDOWS_CUI {
			t.Errorf("PE subsystem %d; want console (%d)", oh.Subsystem, pe.IMAGE_SUBSYSTEM_WINDOWS_CUI)
		}
	}
}

// lcCodeSignature is the Mach-O load command of a code signature.
const lcCodeSignature = 0x1d

// checkMachO checks a macOS executable; signed: it must carry a code signature, as macOS on
// Apple Silicon runs no arm64 program without one (Go's linker signs them ad hoc).
func checkMachO(cpu macho.Cpu, signed bool) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		f, err := macho.Open(path)
		if err != nil {
			t.Fatalf("not a Mach-O file: %v", err)
		}
		defer f.Close()
		if f.Cpu != cpu || f.Type != macho.TypeExec {
			t.Errorf("Mach-O %v %v; want %v %v", f.Cpu, f.Type, cpu, macho.TypeExec)
		}
		if !signed {
			return
		}
		for _, l := range f.Loads {
			if raw := l.Raw(); len(raw) >= 4 && f.ByteOrder.Uint32(raw) == lcCodeSignature {
				return
			}
		}
		t.Error("no code signature (LC_CODE_SIGNATURE): macOS on Apple Silicon would kill it at start")
	}
}

// TestDistTargets_MatchMakefile keeps the Makefile's PLATFORMS, which `make dist` builds, the
// same as the targets TestDist_CrossCompile checks.
func TestDistTargets_MatchMakefile(t *testing.T) {
	f, err := os.Open("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "PLATFORMS"); ok {
			if _, list, ok := strings.Cut(rest, "="); ok {
				got = strings.Fields(list)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tt := range distTargets {
		want = append(want, tt.goos+"/"+tt.goarch)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Makefile PLATFORMS = %v; want %v, the targets TestDist_CrossCompile checks", got, want)
	}
}

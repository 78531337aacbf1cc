package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
)

func validRegister() *protocol.Register {
	return &protocol.Register{
		Name: "rig", Region: "de", Agent: "v1.2.3", Engine: "ollama", Windows: "mon-fri 08:00-18:00", Timezone: "Europe/Berlin",
		Hardware: protocol.Hardware{OS: "linux", Arch: "amd64", CPUs: 16, CPU: "AMD Ryzen 9", MemoryMiB: 65536, Fingerprint: "0123456789abcdef",
			GPUs: []protocol.GPU{{Index: 0, Vendor: "nvidia", Name: "NVIDIA GeForce RTX 4090", UUID: "GPU-8e1e5c3c-5f2c-4b8e-9a3c-0d1e2f3a4b5c", VRAMMiB: 24564, Driver: "550.54", CUDA: "12.4"}}},
		Offers: []protocol.Offer{{Model: "llama3.1:8b", Quantization: "Q4_K_M", ContextLength: 8192, MaxConcurrent: 4}},
	}
}

// askSchedule is a valid ask schedule, changed by change.
func askSchedule(change func(*protocol.AskSchedule)) *protocol.AskSchedule {
	s := &protocol.AskSchedule{Timezone: "Europe/Berlin", Windows: []protocol.AskWindow{
		{Name: "peak", When: "mon-fri 09:00-18:00", InputPrice: 300_000_000, OutputPrice: 600_000_000}}}
	change(s)
	return s
}

func TestCheckRegister(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	offers := func(n int) []protocol.Offer {
		os := make([]protocol.Offer, n)
		for i := range os {
			os[i] = protocol.Offer{Model: fmt.Sprint("m", i), MaxConcurrent: 1}
		}
		return os
	}
	tests := []struct {
		name   string
		change func(r *protocol.Register)
		want   string // the refusal's reason; "" if accepted
	}{
		{"valid", func(*protocol.Register) {}, ""},
		{"at the limits", func(r *protocol.Register) {
			r.Name, r.Agent, r.Region, r.Offers = long(protocol.MaxNameBytes), long(protocol.MaxTagBytes), long(protocol.MaxRegionBytes), offers(protocol.MaxOffers)
			r.Offers[0].Model = long(protocol.MaxModelBytes)
			r.Hardware.GPUs = make([]protocol.GPU, protocol.MaxGPUs)
		}, ""},
		{"no region", func(r *protocol.Register) { r.Region = "" }, ""},
		{"provider's area", func(r *protocol.Register) { r.Region = "eu-west" }, ""},
		{"too many offers", func(r *protocol.Register) { r.Offers = offers(5000) }, "too many offers: 5000 > 64"},
		{"no offers", func(r *protocol.Register) { r.Offers = nil }, "offers no model"},
		{"long name", func(r *protocol.Register) { r.Name = long(1000) }, "name too long: 1000 > 128 bytes"},
		{"control character in name", func(r *protocol.Register) { r.Name = "rig\x1b[31m" }, "name holds a control character"},
		{"bidi override in name", func(r *protocol.Register) { r.Name = "rig\u202e" }, "name holds a control character"},
		{"long model id", func(r *protocol.Register) { r.Offers[0].Model = long(5000) }, "offer 0: model id too long: 5000 > 256 bytes"},
		{"newline in model id", func(r *protocol.Register) { r.Offers[0].Model = "m\nINFO fake log line" }, "offer 0: model id holds a control character"},
		{"no model", func(r *protocol.Register) { r.Offers[0].Model = "" }, "offer 0 has no model"},
		{"model twice", func(r *protocol.Register) { r.Offers = append(r.Offers, r.Offers[0]) }, `model "llama3.1:8b" offered twice`},
		{"long model twice", func(r *protocol.Register) {
			r.Offers[0].Model = long(200)
			r.Offers = append(r.Offers, r.Offers[0])
		}, `model "` + strings.Repeat("x", 21) + `…" offered twice`},
		{"long quantization", func(r *protocol.Register) { r.Offers[0].Quantization = long(100) }, "quantization too long: 100 > 64 bytes"},
		{"no slots", func(r *protocol.Register) { r.Offers[0].MaxConcurrent = 0 }, "max_concurrent 0 not in 1..1024"},
		{"too many slots", func(r *protocol.Register) { r.Offers[0].MaxConcurrent = 1 << 30 }, "max_concurrent 1073741824 not in 1..1024"},
		{"negative context", func(r *protocol.Register) { r.Offers[0].ContextLength = -1 }, "context_length -1 not in"},
		{"negative price", func(r *protocol.Register) { r.Offers[0].InputPrice = -1 }, "prices must be between 0 and"},
		{"ask schedule", func(r *protocol.Register) { r.Offers[0].AskSchedule = askSchedule(func(*protocol.AskSchedule) {}) }, ""},
		{"ask schedule at the limits", func(r *protocol.Register) {
			r.Offers[0].AskSchedule = askSchedule(func(s *protocol.AskSchedule) {
				for i := len(s.Windows); i < protocol.MaxAskWindows; i++ {
					s.Windows = append(s.Windows, protocol.AskWindow{Name: fmt.Sprint("w", i), When: "sun 01:00-02:00", InputPrice: int64(money.MaxPrice)})
				}
			})
		}, ""},
		{"ask schedule without a zone", func(r *protocol.Register) {
			r.Offers[0].AskSchedule = askSchedule(func(s *protocol.AskSchedule) { s.Timezone = "" })
		}, `offer "llama3.1:8b": ask schedule: no time zone`},
		{"ask schedule in an unknown zone", func(r *protocol.Register) {
			r.Offers[0].AskSchedule = askSchedule(func(s *protocol.AskSchedule) { s.Timezone = "../../etc/passwd" })
		}, `ask schedule: unknown time zone`},
		{"ask schedule of too many windows", func(r *protocol.Register) {
			r.Offers[0].AskSchedule = askSchedule(func(s *protocol.AskSchedule) {
				for i := range 1000 {
					s.Windows = append(s.Windows, protocol.AskWindow{Name: fmt.Sprint("w", i), When: "daily 01:00-02:00"})
				}
			})
		}, "ask schedule: too many windows: 1001 > 16"},
		{"ask over the max", func(r *protocol.Register) {
			r.Offers[0].AskSchedule = askSchedule(func(s *protocol.AskSchedule) { s.Windows[0].OutputPrice = 1 << 62 })
		}, `ask schedule: window "peak": prices must be between 0 and`},
		{"ask window of a bad spec", func(r *protocol.Register) {
			r.Offers[0].AskSchedule = askSchedule(func(s *protocol.AskSchedule) { s.Windows[0].When = "someday " + long(400) })
		}, `ask schedule: window "peak": unknown day "someday"`},
		{"ask window of a control character", func(r *protocol.Register) {
			r.Offers[0].AskSchedule = askSchedule(func(s *protocol.AskSchedule) { s.Windows[0].Name = "peak\n" })
		}, `ask schedule: window 0: name "peak\n": want letters, digits, - or _`},
		{"long region", func(r *protocol.Register) { r.Region = long(100) }, "region too long: 100 > 32 bytes"},
		{"invalid region", func(r *protocol.Register) { r.Region = "eu west" }, `invalid region "eu west"`},
		{"region label injection", func(r *protocol.Register) { r.Region = `de",level="trusted` }, "invalid region"},
		{"long agent version", func(r *protocol.Register) { r.Agent = long(65) }, "agent version too long: 65 > 64 bytes"},
		{"long engine", func(r *protocol.Register) { r.Engine = long(65) }, "engine too long"},
		{"long windows", func(r *protocol.Register) { r.Windows = long(513) }, "windows too long: 513 > 512 bytes"},
		{"long timezone", func(r *protocol.Register) { r.Timezone = long(65) }, "timezone too long"},
		{"long fingerprint", func(r *protocol.Register) { r.Hardware.Fingerprint = long(65) }, "hardware fingerprint too long"},
		{"long cpu", func(r *protocol.Register) { r.Hardware.CPU = long(129) }, "cpu name too long: 129 > 128 bytes"},
		{"negative memory", func(r *protocol.Register) { r.Hardware.MemoryMiB = -1 }, "negative cpus or memory"},
		{"too many GPUs", func(r *protocol.Register) { r.Hardware.GPUs = make([]protocol.GPU, 100) }, "too many GPUs: 100 > 64"},
		{"long GPU name", func(r *protocol.Register) { r.Hardware.GPUs[0].Name = long(129) }, "gpu 0 name too long: 129 > 128 bytes"},
		{"long GPU UUID", func(r *protocol.Register) { r.Hardware.GPUs[0].UUID = long(65) }, "gpu 0 uuid too long"},
		{"long driver", func(r *protocol.Register) { r.Hardware.GPUs[0].Driver = long(65) }, "gpu 0 driver too long"},
		{"negative VRAM", func(r *protocol.Register) { r.Hardware.GPUs[0].VRAMMiB = -1 }, "gpu 0: negative vram"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRegister()
			tt.change(r)
			err := checkRegister(r)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want == "":
			case err == nil:
				t.Errorf("accepted; want refused saying %q", tt.want)
			case !strings.Contains(err.Error(), tt.want) || !overLimit(err):
				t.Errorf("refused saying %q (limit %v); want %q", err, overLimit(err), tt.want)
			case len(err.Error()) > maxCloseReason:
				t.Errorf("a reason of %d bytes: %q; want at most %d", len(err.Error()), err, maxCloseReason)
			}
		})
	}
}

// A region's ASCII letters are lower-cased, so it is one label whatever case the node wrote.
func TestCheckRegister_LowerCasesTheRegion(t *testing.T) {
	r := validRegister()
	r.Region = "EU-West"
	if err := checkRegister(r); err != nil || r.Region != "eu-west" {
		t.Errorf("region %q, err %v; want eu-west", r.Region, err)
	}
}

func TestCheckHeartbeat(t *testing.T) {
	var logs bytes.Buffer
	s := &session{fleet: New(Config{Log: slog.New(slog.NewTextHandler(&logs, nil))}), node: &Node{ID: "node_x"}}
	procs := make([]protocol.GPUProcess, 1000)
	for i := range procs {
		procs[i] = protocol.GPUProcess{PID: i, Name: strings.Repeat("p", 300), UsedMiB: int64(i)}
	}
	hb := &protocol.Heartbeat{Paused: strings.Repeat("é", 1000), Telemetry: &protocol.Telemetry{Processes: procs}}
	if err := s.checkHeartbeat(hb); err != nil {
		t.Fatal(err)
	}
	if n := len(hb.Paused); n > protocol.MaxPauseReasonBytes || !strings.HasSuffix(hb.Paused, "é…") {
		t.Errorf("a pause reason of %d bytes ending %q; want at most %d, cut between characters", n, hb.Paused[len(hb.Paused)-8:], protocol.MaxPauseReasonBytes)
	}
	ps := hb.Telemetry.Processes
	if len(ps) != protocol.MaxGPUProcesses || ps[0].UsedMiB != 999 || ps[len(ps)-1].UsedMiB != 1000-protocol.MaxGPUProcesses {
		t.Errorf("%d processes, from %d MiB to %d; want the %d using the most memory", len(ps), ps[0].UsedMiB, ps[len(ps)-1].UsedMiB, protocol.MaxGPUProcesses)
	}
	if n := len(ps[0].Name); n > protocol.MaxProcessNameBytes {
		t.Errorf("a process name of %d bytes; want at most %d", n, protocol.MaxProcessNameBytes)
	}
	// Clamped again: logged once per field and connection all the same.
	again := &protocol.Heartbeat{Paused: strings.Repeat("x", 1000), Telemetry: &protocol.Telemetry{Processes: procs}}
	if err := s.checkHeartbeat(again); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"pause reason", "gpu processes", "gpu process name"} {
		if n := strings.Count(logs.String(), `field="`+field+`"`); n != 1 {
			t.Errorf("clamping the %s logged %d times; want once:\n%s", field, n, logs.String())
		}
	}

	refused := []struct {
		hb   protocol.Heartbeat
		want string
	}{
		{protocol.Heartbeat{Telemetry: &protocol.Telemetry{GPUs: make([]protocol.GPUStat, 100)}}, "too many GPUs in a heartbeat: 100 > 64"},
		{protocol.Heartbeat{Loaded: make([]string, 1000)}, "too many loaded models in a heartbeat: 1000 > 256"},
	}
	for _, tt := range refused {
		if err := s.checkHeartbeat(&tt.hb); err == nil || err.Error() != tt.want || !overLimit(err) {
			t.Errorf("refused with %v; want %q", err, tt.want)
		}
	}
}

func TestCheckDeltaAndEnd(t *testing.T) {
	var logs bytes.Buffer
	s := &session{fleet: New(Config{Log: slog.New(slog.NewTextHandler(&logs, nil))}), node: &Node{ID: "node_x"}}
	deltas := []struct {
		d    protocol.Delta
		want string
	}{
		{protocol.Delta{Text: strings.Repeat("x", protocol.MaxDeltaBytes), Pieces: protocol.MaxDeltaPieces}, ""},
		{protocol.Delta{Text: strings.Repeat("x", protocol.MaxDeltaBytes/2), Reasoning: strings.Repeat("x", protocol.MaxDeltaBytes/2+1)}, fmt.Sprintf("delta too large: %d > %d bytes", protocol.MaxDeltaBytes+1, protocol.MaxDeltaBytes)},
		{protocol.Delta{ToolCalls: json.RawMessage(`"` + strings.Repeat("x", protocol.MaxDeltaBytes) + `"`)}, "delta too large"},
		{protocol.Delta{Text: "x", Pieces: -1}, "delta pieces -1 not in 0..64"},
		{protocol.Delta{Text: "x", Pieces: 1000}, "delta pieces 1000 not in 0..64"},
	}
	for _, tt := range deltas {
		err := checkDelta(&tt.d)
		if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && !strings.Contains(got, tt.want)) {
			t.Errorf("delta of %d bytes, %d pieces: %v; want %q", len(tt.d.Text)+len(tt.d.Reasoning)+len(tt.d.ToolCalls), tt.d.Pieces, err, tt.want)
		}
	}
	ends := []struct {
		e    protocol.End
		want string
	}{
		{protocol.End{FinishReason: "stop", Usage: protocol.Usage{PromptTokens: 10, CompletionTokens: 20}, Receipt: json.RawMessage(`{}`)}, ""},
		{protocol.End{FinishReason: strings.Repeat("s", 33)}, "finish reason too long: 33 > 32 bytes"},
		{protocol.End{Usage: protocol.Usage{PromptTokens: -5}}, "usage of -5 prompt and 0 completion tokens not in 0..16777216"},
		{protocol.End{Usage: protocol.Usage{CompletionTokens: 1 << 30}}, "usage of 0 prompt and 1073741824 completion tokens"},
		{protocol.End{Receipt: json.RawMessage(`"` + strings.Repeat("r", protocol.MaxReceiptBytes) + `"`)}, "receipt too large: 4098 > 4096 bytes"},
	}
	for _, tt := range ends {
		err := s.checkEnd(&tt.e)
		if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && !strings.Contains(got, tt.want)) {
			t.Errorf("end %+v: %v; want %q", tt.e.Usage, err, tt.want)
		}
	}
	e := &protocol.End{Error: &protocol.Error{Message: strings.Repeat("upstream said: ", 10000)}}
	if err := s.checkEnd(e); err != nil || len(e.Error.Message) > protocol.MaxErrorBytes {
		t.Errorf("an error message of %d bytes, err %v; want it clamped to %d", len(e.Error.Message), err, protocol.MaxErrorBytes)
	}
	if !strings.Contains(logs.String(), `field="error message" got=150000 limit=1024`) {
		t.Errorf("the clamp is not logged:\n%s", logs.String())
	}
}

package hw

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shareai/shareai/internal/protocol"
)

// rocmArgs is what Discover and Sample ask rocm-smi for: one run gives both the GPUs and their
// live readings.
var rocmArgs = []string{
	"--showproductname", "--showmeminfo", "vram", "--showtemp", "--showpower", "--showuse", "--json",
}

// rocm-smi's key names changed across ROCm versions; each list is tried in order, ignoring
// case ("Card series" became "Card Series").
var (
	rocmName        = []string{"Card Series", "Device Name", "Card SKU", "Card Model"}
	rocmUUID        = []string{"Unique ID"}
	rocmVRAMTotal   = []string{"VRAM Total Memory (B)"}
	rocmVRAMUsed    = []string{"VRAM Total Used Memory (B)"}
	rocmTemperature = []string{"Temperature (Sensor edge) (C)", "Temperature (Sensor junction) (C)"}
	rocmPower       = []string{"Average Graphics Package Power (W)", "Current Socket Graphics Package Power (W)"}
	rocmPowerLimit  = []string{"Max Graphics Package Power (W)"}
	rocmUtilization = []string{"GPU use (%)"}
	rocmDriver      = []string{"Driver version"}
)

// rocmCard is one card of rocm-smi's JSON output: its values by lower-case key.
type rocmCard struct {
	index  int
	values map[string]string
}

// get returns the value of the first of keys the card has, or "" when it has none or the value
// is not available.
func (c rocmCard) get(keys []string) string {
	for _, k := range keys {
		if v, ok := c.values[strings.ToLower(k)]; ok && !notAvailable(v) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// mib returns a value in bytes as MiB, nil when it is not a number.
func (c rocmCard) mib(keys []string) *int64 {
	f, ok := parseNumber(c.get(keys))
	if !ok || f < 0 || f > 1<<62 {
		return nil
	}
	n := int64(f) >> 20
	return &n
}

// float returns a value as a number, nil when it is not one.
func (c rocmCard) float(keys []string) *float64 {
	f, ok := parseNumber(c.get(keys))
	if !ok {
		return nil
	}
	return &f
}

// queryAMD runs rocm-smi and returns its cards, in index order, and the driver version.
func queryAMD(ctx context.Context, run Runner) ([]rocmCard, string, error) {
	out, err := run(ctx, "rocm-smi", rocmArgs...)
	if err != nil {
		return nil, "", fmt.Errorf("rocm-smi: %w", err)
	}
	cards, driver, err := parseROCm(out)
	if err != nil {
		return nil, "", fmt.Errorf("read rocm-smi output: %w", err)
	}
	return cards, driver, nil
}

// parseROCm reads rocm-smi --json output: an object with one object per card ("card0", ...)
// and maybe a "system" object with the driver version. Warnings printed before the JSON are
// skipped; values that are not strings are used as their JSON text.
func parseROCm(out []byte) ([]rocmCard, string, error) {
	start := bytes.IndexByte(out, '{')
	if start < 0 {
		return nil, "", errors.New("no JSON object in the output")
	}
	var top map[string]json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(out[start:])).Decode(&top); err != nil {
		return nil, "", err
	}
	var cards []rocmCard
	var driver string
	for key, raw := range top {
		values, ok := rocmValues(raw)
		if !ok {
			continue
		}
		if key == "system" {
			driver = rocmCard{values: values}.get(rocmDriver)
			continue
		}
		if n, ok := cardIndex(key); ok {
			cards = append(cards, rocmCard{index: n, values: values})
		}
	}
	slices.SortFunc(cards, func(a, b rocmCard) int { return cmp.Compare(a.index, b.index) })
	return cards, driver, nil
}

// rocmValues decodes one object of rocm-smi's output, keyed by lower-case key; false when raw
// is not an object.
func rocmValues(raw json.RawMessage) (map[string]string, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, false
	}
	values := make(map[string]string, len(obj))
	for k, v := range obj {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			s = string(v)
		}
		values[strings.ToLower(k)] = s
	}
	return values, true
}

// cardIndex reads the index of a "cardN" key.
func cardIndex(key string) (int, bool) {
	digits, ok := strings.CutPrefix(key, "card")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n > 1<<20 {
		return 0, false
	}
	return n, true
}

// findAMD discovers AMD GPUs.
func findAMD(ctx context.Context, p Probe, _ protocol.Hardware) (found, error) {
	cards, driver, err := queryAMD(ctx, p.runner())
	if err != nil {
		return found{}, err
	}
	return found{gpus: amdGPUs(cards, driver)}, nil
}

// amdGPUs maps rocm-smi cards to GPUs.
func amdGPUs(cards []rocmCard, driver string) []protocol.GPU {
	gpus := make([]protocol.GPU, len(cards))
	for i, c := range cards {
		gpus[i] = protocol.GPU{
			Index:   c.index,
			Vendor:  VendorAMD,
			Name:    c.get(rocmName),
			UUID:    c.get(rocmUUID),
			VRAMMiB: deref(c.mib(rocmVRAMTotal)),
			Driver:  driver,
		}
	}
	return gpus
}

// amdStats maps rocm-smi cards to readings; a nil field is one the tool did not give.
func amdStats(cards []rocmCard) []protocol.GPUStat {
	stats := make([]protocol.GPUStat, len(cards))
	for i, c := range cards {
		stats[i] = protocol.GPUStat{
			Index:          c.index,
			MemoryUsedMiB:  c.mib(rocmVRAMUsed),
			MemoryTotalMiB: c.mib(rocmVRAMTotal),
			TemperatureC:   c.float(rocmTemperature),
			PowerW:         c.float(rocmPower),
			PowerLimitW:    c.float(rocmPowerLimit),
			UtilizationPct: c.float(rocmUtilization),
		}
	}
	return stats
}

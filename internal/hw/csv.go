package hw

import (
	"fmt"
	"iter"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// record is one row of nvidia-smi's CSV output: each value by its field name, as written
// (trimmed). A field the query did not ask for is absent.
type record map[string]string

// parseCSV reads nvidia-smi's --format=csv output. With a header line (--format=csv) the
// fields are named by the header and their values may carry units ("143771 MiB"); without one
// (noheader) they are taken by position from query, the fields the command asked for. NVIDIA
// does not promise a stable format, so a row with a different number of values than fields is
// an error rather than a guess. No output at all is no rows.
func parseCSV(out []byte, query []string) ([]record, error) {
	fields := canonicalFields(query)
	var recs []record
	first := true
	for n, line := range numberedLines(string(out)) {
		values := splitCSV(line)
		if first && isHeader(values) {
			fields = canonicalFields(values)
			first = false
			continue
		}
		first = false
		if len(values) != len(fields) {
			return nil, fmt.Errorf("line %d has %d values, want %d (%s)",
				n, len(values), len(fields), strings.Join(fields, ","))
		}
		rec := make(record, len(fields))
		for i, f := range fields {
			rec[f] = values[i]
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// numberedLines yields the non-blank lines of s with their 1-based line numbers.
func numberedLines(s string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		n := 0
		for line := range strings.Lines(s) {
			n++
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			if !yield(n, line) {
				return
			}
		}
	}
}

// splitCSV splits one line of nvidia-smi's CSV, which never quotes, into trimmed values.
func splitCSV(line string) []string {
	values := strings.Split(line, ",")
	for i, v := range values {
		values[i] = strings.TrimSpace(v)
	}
	return values
}

// headerField matches a header value: a field name, optionally with its unit ("memory.used
// [MiB]"). Data rows never match in every value: our queries start with an index or a PID.
var headerField = regexp.MustCompile(`^[a-z][a-z0-9_.]*( \[[^\]]*\])?$`)

// isHeader reports whether a line's values are a header's field names.
func isHeader(values []string) bool {
	for _, v := range values {
		if !headerField.MatchString(v) {
			return false
		}
	}
	return true
}

// fieldAliases maps the other names nvidia-smi accepts or prints for a field to the one this
// package uses: the header says used_gpu_memory for the used_memory query, for example.
var fieldAliases = map[string]string{
	"gpu_uuid":        "uuid",
	"gpu_name":        "name",
	"used_gpu_memory": "used_memory",
}

// canonicalFields returns the field names, without units, as this package names them.
func canonicalFields(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		n, _, _ = strings.Cut(strings.TrimSpace(n), " [")
		if alias, ok := fieldAliases[n]; ok {
			n = alias
		}
		out[i] = n
	}
	return out
}

// notAvailable reports whether a value is a tool's way of saying it could not read it:
// empty, N/A (older drivers) or any bracketed word: [N/A], [Not Supported], [Unknown Error],
// [Insufficient Permissions], [Not Found].
func notAvailable(v string) bool {
	v = strings.TrimSpace(v)
	switch v {
	case "", "N/A", "n/a":
		return true
	}
	return strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]")
}

// text returns a field's value, or "" when it is absent or not available.
func (r record) text(field string) string {
	v := r[field]
	if notAvailable(v) {
		return ""
	}
	return v
}

// float returns a field's number, nil when it is absent, not available or not a number.
func (r record) float(field string) *float64 {
	f, ok := parseNumber(r[field])
	if !ok {
		return nil
	}
	return &f
}

// int returns a field's whole non-negative number, nil as for float.
func (r record) int(field string) *int64 {
	f, ok := parseNumber(r[field])
	if !ok || f < 0 || f > math.MaxInt64/2 {
		return nil
	}
	n := int64(math.Round(f))
	return &n
}

// parseNumber reads a number with an optional unit after it ("143771 MiB", "250.00 W",
// "100 %", "45C"). It is false for anything else, and for NaN and infinities.
func parseNumber(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if notAvailable(v) {
		return 0, false
	}
	end := strings.IndexFunc(v, func(r rune) bool {
		return !unicode.IsDigit(r) && r != '.' && r != '-' && r != '+' && r != 'e' && r != 'E'
	})
	if end >= 0 {
		v = v[:end]
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

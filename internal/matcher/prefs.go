package matcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// Sorts a request may ask for. The empty sort is SortPrice.
const (
	SortPrice      = "price"
	SortLatency    = "latency"
	SortThroughput = "throughput"
)

// maxListLen bounds the lists in Prefs.
const maxListLen = 256

// maxLatency bounds preferred_max_latency.
const maxLatency = time.Hour

// Prefs are a buyer's routing preferences: the request's "provider" object, with OpenRouter's
// names where they exist. The zero Prefs asks for nothing: the cheapest reliable node wins.
type Prefs struct {
	// Order lists node or provider ids to try first, in this order.
	Order []string
	// Only allows just these node or provider ids; Ignore refuses these.
	Only, Ignore []string
	// AllowFallbacks false, with Order, allows just the nodes Order lists. Nil means true.
	AllowFallbacks *bool
	// Sort is SortPrice (or ""), SortLatency or SortThroughput.
	Sort string
	// MaxPrice caps the ask per million input (prompt) and output (completion) tokens.
	MaxPrice PriceCap
	// Quantizations allows just these quantizations, lower case; "unknown" allows offers
	// that do not say.
	Quantizations []string
	// RequireParameters is accepted for OpenRouter's clients; every node takes every
	// parameter the coordinator accepts, so it changes nothing yet.
	RequireParameters bool
	// Regions allows just nodes in these countries: lower-case ISO 3166-1 alpha-2 codes and
	// groups ("eu", "us", "asia"). Strict: a node whose country is unknown is outside.
	Regions []string
	// MinReliability refuses nodes less reliable than this, 0..1.
	MinReliability *float64
	// PreferredMaxLatency ranks nodes known to be slower (RTT + time to first token) after
	// the others, without refusing them. Zero: no preference.
	PreferredMaxLatency time.Duration
}

// PriceCap caps asks, in USD per million tokens. Nil is no cap.
type PriceCap struct {
	Prompt, Completion *money.Price
}

// FallbacksAllowed reports whether nodes not in Order may serve.
func (p Prefs) FallbacksAllowed() bool { return p.AllowFallbacks == nil || *p.AllowFallbacks }

// Merge fills the fields p leaves unset from defaults (an API key's, say): p wins field by
// field. A list is unset when empty, RequireParameters when false.
func (p Prefs) Merge(defaults Prefs) Prefs {
	d := defaults
	if len(p.Order) == 0 {
		p.Order = d.Order
	}
	if len(p.Only) == 0 {
		p.Only = d.Only
	}
	if len(p.Ignore) == 0 {
		p.Ignore = d.Ignore
	}
	if p.AllowFallbacks == nil {
		p.AllowFallbacks = d.AllowFallbacks
	}
	if p.Sort == "" {
		p.Sort = d.Sort
	}
	if p.MaxPrice.Prompt == nil {
		p.MaxPrice.Prompt = d.MaxPrice.Prompt
	}
	if p.MaxPrice.Completion == nil {
		p.MaxPrice.Completion = d.MaxPrice.Completion
	}
	if len(p.Quantizations) == 0 {
		p.Quantizations = d.Quantizations
	}
	p.RequireParameters = p.RequireParameters || d.RequireParameters
	if len(p.Regions) == 0 {
		p.Regions = d.Regions
	}
	if p.MinReliability == nil {
		p.MinReliability = d.MinReliability
	}
	if p.PreferredMaxLatency == 0 {
		p.PreferredMaxLatency = d.PreferredMaxLatency
	}
	return p
}

// FieldError is a preference that cannot be read. Field is its JSON path, such as
// "provider.max_price.prompt", for the API error's param.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ParsePrefs reads the request's "provider" object. Absent or null is the zero Prefs. Unknown
// fields are refused, so that a misspelt rule (a region, above all) is never silently ignored.
// Errors are *FieldError.
func ParsePrefs(raw json.RawMessage) (Prefs, error) {
	var p Prefs
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return p, nil
	}
	var fields map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &fields) != nil {
		return Prefs{}, fieldErr("provider", "must be an object")
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names) // the first error is always the same one
	for _, name := range names {
		if err := p.parseField(name, fields[name]); err != nil {
			return Prefs{}, err
		}
	}
	return p, nil
}

func (p *Prefs) parseField(name string, v json.RawMessage) error {
	field := "provider." + name
	parse, ok := parsers[name]
	if !ok {
		return fieldErr(field, "unknown field")
	}
	if isNull(v) {
		return nil
	}
	return parse(p, field, v)
}

var parsers map[string]func(p *Prefs, field string, v json.RawMessage) error

func init() {
	parsers = map[string]func(p *Prefs, field string, v json.RawMessage) error{
		"order":  func(p *Prefs, f string, v json.RawMessage) (err error) { p.Order, err = ids(f, v); return },
		"only":   func(p *Prefs, f string, v json.RawMessage) (err error) { p.Only, err = ids(f, v); return },
		"ignore": func(p *Prefs, f string, v json.RawMessage) (err error) { p.Ignore, err = ids(f, v); return },
		"allow_fallbacks": func(p *Prefs, f string, v json.RawMessage) error {
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return fieldErr(f, "must be true or false")
			}
			p.AllowFallbacks = &b
			return nil
		},
		"sort": func(p *Prefs, f string, v json.RawMessage) error {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return fieldErr(f, "must be a string: price, latency or throughput")
			}
			switch s {
			case "", SortPrice, SortLatency, SortThroughput:
				p.Sort = s
				return nil
			}
			return fieldErr(f, "%q is not price, latency or throughput", s)
		},
		"max_price": parseMaxPrice,
		"quantizations": func(p *Prefs, f string, v json.RawMessage) error {
			qs, err := ids(f, v)
			for i, q := range qs {
				qs[i] = strings.ToLower(q)
			}
			p.Quantizations = qs
			return err
		},
		"require_parameters": func(p *Prefs, f string, v json.RawMessage) error {
			if json.Unmarshal(v, &p.RequireParameters) != nil {
				return fieldErr(f, "must be true or false")
			}
			return nil
		},
		"regions": func(p *Prefs, f string, v json.RawMessage) error {
			rs, err := ids(f, v)
			if err != nil {
				return err
			}
			for i, r := range rs {
				r = strings.ToLower(r)
				if !isRegionName(r) {
					hint := ""
					if r == "uk" {
						hint = " (the United Kingdom is gb)"
					}
					return fieldErr(fmt.Sprintf("%s[%d]", f, i), "%q is not an ISO 3166-1 alpha-2 country code or a region group (eu, us, asia)%s", rs[i], hint)
				}
				rs[i] = r
			}
			p.Regions = rs
			return nil
		},
		"min_reliability": func(p *Prefs, f string, v json.RawMessage) error {
			x, err := number(f, v)
			if err != nil || x < 0 || x > 1 {
				return fieldErr(f, "must be a number from 0 to 1")
			}
			p.MinReliability = &x
			return nil
		},
		"preferred_max_latency": func(p *Prefs, f string, v json.RawMessage) error {
			ms, err := number(f, v)
			if err != nil || ms < 0 || ms > float64(maxLatency/time.Millisecond) {
				return fieldErr(f, "must be a number of milliseconds from 0 to %d", maxLatency/time.Millisecond)
			}
			p.PreferredMaxLatency = time.Duration(ms * float64(time.Millisecond))
			return nil
		},
	}
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// ids reads a list of non-empty strings; an empty list is nil.
func ids(field string, v json.RawMessage) ([]string, error) {
	var ss []string
	if json.Unmarshal(v, &ss) != nil {
		return nil, fieldErr(field, "must be an array of strings")
	}
	if len(ss) > maxListLen {
		return nil, fieldErr(field, "has %d entries; at most %d", len(ss), maxListLen)
	}
	for i, s := range ss {
		if s == "" {
			return nil, fieldErr(fmt.Sprintf("%s[%d]", field, i), "must not be empty")
		}
	}
	if len(ss) == 0 {
		return nil, nil
	}
	return ss, nil
}

// number reads a JSON number.
func number(field string, v json.RawMessage) (float64, error) {
	var n json.Number
	if len(bytes.TrimSpace(v)) == 0 || bytes.TrimSpace(v)[0] == '"' || json.Unmarshal(v, &n) != nil {
		return 0, fieldErr(field, "must be a number")
	}
	x, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || math.IsInf(x, 0) {
		return 0, fieldErr(field, "must be a number")
	}
	return x, nil
}

// parseMaxPrice reads {"prompt": 0.5, "completion": "1.25"}: USD per million tokens, as JSON
// numbers or strings, read exactly (no float). OpenRouter's "request" and "image" caps are
// checked and accepted: no node charges per request or per image, so they always hold.
func parseMaxPrice(p *Prefs, field string, v json.RawMessage) error {
	var caps map[string]json.RawMessage
	if bytes.TrimSpace(v)[0] != '{' || json.Unmarshal(v, &caps) != nil {
		return fieldErr(field, "must be an object such as {\"prompt\": 0.5, \"completion\": 1.5} in USD per 1M tokens")
	}
	names := make([]string, 0, len(caps))
	for name := range caps {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f := field + "." + name
		var dst **money.Price
		switch name {
		case "prompt":
			dst = &p.MaxPrice.Prompt
		case "completion":
			dst = &p.MaxPrice.Completion
		case "request", "image":
		default:
			return fieldErr(f, "unknown field")
		}
		if isNull(caps[name]) {
			continue
		}
		price, err := usdPerMillion(f, caps[name])
		if err != nil {
			return err
		}
		if dst != nil {
			*dst = &price
		}
	}
	return nil
}

// usdPerMillion reads a price as a JSON number or string, exactly, with money.ParsePrice.
func usdPerMillion(field string, v json.RawMessage) (money.Price, error) {
	var s string
	if json.Unmarshal(v, &s) != nil {
		var n json.Number
		if json.Unmarshal(v, &n) != nil {
			return 0, fieldErr(field, "must be a number or a string of USD per 1M tokens")
		}
		s = n.String()
	}
	price, err := money.ParsePrice(s)
	if err != nil {
		return 0, fieldErr(field, "%q is not a price in USD per 1M tokens: a decimal from 0 with at most 9 decimals, no exponent", s)
	}
	return price, nil
}

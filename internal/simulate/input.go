package simulate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/shareai/shareai/internal/hw"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/schedule"
	"github.com/shareai/shareai/internal/tier"
)

// Fleet is the supply side of a simulation, as fleet.yaml writes it: the market's settings
// (the coordinator's) and the GPU classes that serve in it.
type Fleet struct {
	// Start is when the simulated time begins; zero: DefaultStart.
	Start   time.Time `yaml:"start"`
	Market  Market    `yaml:"market"`
	Classes []Class   `yaml:"classes"`
}

// DefaultStart is a Monday, 00:00 UTC: a simulated week starts on Monday.
var DefaultStart = time.Date(2026, time.March, 2, 0, 0, 0, 0, time.UTC)

// Market is the coordinator's settings that change what a request pays and how it waits, with
// the names of the coordinator's flags (docs/configuration.md).
type Market struct {
	// PlatformFee is the fee in percent added to the node's ask ("5"); empty: 5.
	PlatformFee string `yaml:"platform_fee"`
	// TierPrices are the tiers' multipliers ("gold=1.5,silver=1,bronze=0.5").
	TierPrices string `yaml:"tier_prices"`
	// BatchPrice is batch lines' multiplier as a factor ("0.5"); empty: the core's default.
	BatchPrice   string        `yaml:"batch_price"`
	QueueTimeout time.Duration `yaml:"queue_timeout"`
	QueueLength  int           `yaml:"queue_length"`
	QueuePerKey  int           `yaml:"queue_per_key"`
	Surge        Surge         `yaml:"surge"`
}

// Surge is the operator's surge multiplier (pricing.SurgeConfig), sampled as the fleet samples
// it (every fleet.DefaultSurgeInterval).
type Surge struct {
	Enabled   bool          `yaml:"enabled"`
	Floor     float64       `yaml:"floor"`
	Ceiling   float64       `yaml:"ceiling"`
	Target    float64       `yaml:"target"`
	Smoothing time.Duration `yaml:"smoothing"`
}

// Class is a number of like nodes: one GPU model, its owners' settings and how it behaves.
type Class struct {
	Name string `yaml:"name"`
	// GPU names the hardware, for reports ("RTX 3080"); empty: Name.
	GPU   string `yaml:"gpu"`
	Count int    `yaml:"count"`
	// VRAMGB is one node's GPU memory, in GiB: each model must fit it (hw.Check), at the
	// class's quantization and slots.
	VRAMGB float64 `yaml:"vram_gb"`
	// HourlyUSD is what one such GPU costs dedicated, 24/7, per hour: the comparison's price.
	HourlyUSD    string   `yaml:"hourly_usd"`
	Models       []string `yaml:"models"`
	Quantization string   `yaml:"quantization"`
	// MaxConcurrent is each model's slots on a node (the provider's max_concurrent); 0: 4.
	MaxConcurrent int     `yaml:"max_concurrent"`
	GoldShare     float64 `yaml:"gold_share"`
	NoBronze      bool    `yaml:"no_bronze"`
	NoBatch       bool    `yaml:"no_batch"`
	// Continues says the nodes can take over a partial answer; nil: true.
	Continues *bool `yaml:"continues"`
	// Region is the nodes' country; Regions, instead, spreads them over countries by weight.
	Region  string             `yaml:"region"`
	Regions map[string]float64 `yaml:"regions"`
	// Timezone and Windows are the nodes' availability, as a provider file's availability
	// section writes it; empty windows: always. Drain is how long jobs go on once a window
	// closes; 0: 10m, as the agent's default.
	Timezone string        `yaml:"timezone"`
	Windows  string        `yaml:"windows"`
	Drain    time.Duration `yaml:"drain"`
	// Price is the ask and its schedule, as a provider file's price section writes it.
	Price Price `yaml:"price"`
	// Schedule, when set, is the ask schedule itself, as the protocol carries it (a provider
	// file's, read by its own loader); it replaces Price's windows.
	Schedule *protocol.AskSchedule `yaml:"-"`
	// AskSpread spreads the nodes' asks: each node's is the class's times a factor drawn
	// uniformly in [1−AskSpread, 1+AskSpread], as providers set their own.
	AskSpread float64 `yaml:"ask_spread"`
	// Reliability is the nodes' reputation score, which the auction divides asks by; 0: 0.95.
	Reliability float64 `yaml:"reliability"`
	// Level is the nodes' trust level: verified (the default) or trusted.
	Level string `yaml:"level"`
	// DropsPerDay is how often a node's connection drops while it is online, on average;
	// its jobs fail and it is back after Reconnect (0: 30s).
	DropsPerDay float64       `yaml:"drops_per_day"`
	Reconnect   time.Duration `yaml:"reconnect"`
	// TokensPerSecond is one answer's output rate; TTFT its time to first token, to which
	// each prompt token adds 1/PrefillTokensPerSecond (0: nothing). RTT is the round trip.
	TokensPerSecond        float64       `yaml:"tokens_per_second"`
	TTFT                   time.Duration `yaml:"ttft"`
	PrefillTokensPerSecond float64       `yaml:"prefill_tokens_per_second"`
	RTT                    time.Duration `yaml:"rtt"`
	// Provider is the account that owns the nodes; empty: the class's name.
	Provider string `yaml:"provider"`
}

// Price is an ask in USD per million input and output tokens, and its schedule: the shape of
// a provider file's price section (docs/configuration.md), read the same way. It repeats
// config.Price rather than use it: package config links the whole live coordinator, which
// the simulator must not (deps_test.go).
type Price struct {
	Input    string      `yaml:"input"`
	Output   string      `yaml:"output"`
	Timezone string      `yaml:"timezone"`
	Windows  []AskWindow `yaml:"windows"`
}

// AskWindow is a window of an ask schedule: its name, when it is open (a weekly spec of
// package schedule) and its asks; an ask it does not set is the flat one.
type AskWindow struct {
	Name   string `yaml:"name"`
	When   string `yaml:"when"`
	Input  string `yaml:"input"`
	Output string `yaml:"output"`
}

// Demand is the buyers' side, as demand.yaml writes it: streams of live requests and batches.
type Demand struct {
	Streams []Stream `yaml:"streams"`
	Batches []Batch  `yaml:"batches"`
}

// Stream is one kind of live traffic: requests for a model over the day and the week.
type Stream struct {
	Name  string `yaml:"name"`
	Model string `yaml:"model"`
	// Fallbacks are the request's fallback models, tried in order (the request's models).
	Fallbacks []string `yaml:"fallbacks"`
	// Rate is the requests per second at a curve value of 1: at time t the rate is Rate ×
	// Daily(hour of t) × Weekly(day of t) × the factors of the bursts open at t.
	Rate float64 `yaml:"rate"`
	// Timezone is the curves' clock; empty: UTC.
	Timezone string `yaml:"timezone"`
	// Daily holds 24 values, one per hour from 00:00, linearly interpolated; empty: flat 1.
	Daily []float64 `yaml:"daily"`
	// Weekly holds 7 values, Monday first; empty: 1 each day.
	Weekly []float64 `yaml:"weekly"`
	Bursts []Burst   `yaml:"bursts"`
	// PromptTokens and AnswerTokens are the lengths, each a log-normal distribution.
	PromptTokens Length `yaml:"prompt_tokens"`
	AnswerTokens Length `yaml:"answer_tokens"`
	// Tiers are the shares of gold, silver and bronze requests; empty: all silver.
	Tiers map[string]float64 `yaml:"tiers"`
	// Provider is the requests' routing preferences: the API's provider object.
	Provider map[string]any `yaml:"provider"`
	// Keys is how many API keys the stream's buyers use: the queue bounds each key's
	// waiting requests; 0: 100.
	Keys int `yaml:"keys"`
	// Dedicated names the class of the dedicated GPUs the stream is compared against; empty:
	// the class that serves the model at the lowest hourly price per token of capacity.
	Dedicated string `yaml:"dedicated"`
}

// Burst multiplies a stream's rate while its windows are open.
type Burst struct {
	// When is a weekly spec of package schedule, such as "tue 14:00-14:30", on the stream's clock.
	When   string  `yaml:"when"`
	Factor float64 `yaml:"factor"`
}

// Length is a log-normal distribution of token counts with its mean and coefficient of
// variation, cut to [1, Max].
type Length struct {
	Mean float64 `yaml:"mean"`
	CV   float64 `yaml:"cv"`
	Max  int     `yaml:"max"`
}

// Batch is a batch of lines submitted through the Batch API at weekly times.
type Batch struct {
	Name  string `yaml:"name"`
	Model string `yaml:"model"`
	// Lines is how many lines each submission holds.
	Lines int `yaml:"lines"`
	// At is a weekly spec of package schedule: a batch is submitted as each of its windows
	// opens ("daily 01:00-01:01": every day at 01:00), on the clock of Timezone (empty: UTC).
	At       string `yaml:"at"`
	Timezone string `yaml:"timezone"`
	// CompletionWindow is how long a batch may run; lines not done by then expire. 0: 24h.
	CompletionWindow time.Duration  `yaml:"completion_window"`
	PromptTokens     Length         `yaml:"prompt_tokens"`
	AnswerTokens     Length         `yaml:"answer_tokens"`
	Provider         map[string]any `yaml:"provider"`
}

// LoadFleet reads a fleet file.
func LoadFleet(path string) (*Fleet, error) {
	var f Fleet
	if err := decodeYAML(path, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// LoadDemand reads a demand file.
func LoadDemand(path string) (*Demand, error) {
	var d Demand
	if err := decodeYAML(path, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// decodeYAML reads one YAML document at path into v, refusing unknown keys.
func decodeYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return parseYAML(path, b, v)
}

func parseYAML(name string, b []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// market is the compiled market settings.
type market struct {
	feeBP      int
	tiers      tier.Multipliers
	batchPrice int64 // basis points
	queue      queueConfig
	surge      pricing.SurgeConfig
}

type queueConfig struct {
	timeout      time.Duration
	length, keys int
}

// defaultBatchPrice is the core's batch price (core.DefaultBatchPrice), written here so that
// the simulator does not link the request core and what it runs on.
const defaultBatchPrice = 5000

func (m Market) compile() (market, error) {
	var c market
	fee := m.PlatformFee
	if fee == "" {
		fee = "5"
	}
	// As the coordinator reads --platform-fee: a percentage with at most 2 decimals.
	v, err := money.ParseUSD(fee)
	if err != nil || v < 0 || v > 100*money.USD || v%(money.USD/100) != 0 {
		return c, fmt.Errorf("market.platform_fee: %q is not a percentage between 0 and 100 with at most 2 decimals", fee)
	}
	c.feeBP = int(v / (money.USD / 100))
	if c.tiers, err = tier.ParseMultipliers(m.TierPrices); err != nil {
		return c, fmt.Errorf("market.tier_prices: %w", err)
	}
	c.batchPrice = defaultBatchPrice
	if m.BatchPrice != "" {
		if c.batchPrice, err = tier.ParseFactor(m.BatchPrice); err != nil {
			return c, fmt.Errorf("market.batch_price: %w", err)
		}
	}
	c.queue = queueConfig{timeout: m.QueueTimeout, length: m.QueueLength, keys: m.QueuePerKey}
	if s := m.Surge; s.Enabled {
		c.surge = pricing.SurgeConfig{Enabled: true, Floor: s.Floor, Ceiling: s.Ceiling, Target: s.Target, Smoothing: s.Smoothing}
		if c.surge.Floor == 0 {
			c.surge.Floor = 1
		}
		if c.surge.Ceiling == 0 {
			c.surge.Ceiling = 2
		}
		if c.surge.Target == 0 {
			c.surge.Target = 0.7
		}
		if !(c.surge.Floor > 0 && c.surge.Ceiling >= c.surge.Floor && c.surge.Ceiling <= pricing.MaxSurge && c.surge.Target >= 0 && c.surge.Target < 1) {
			return c, errors.New("market.surge: want 0 < floor ≤ ceiling ≤ 10 and 0 ≤ target < 1")
		}
	}
	return c, nil
}

// class is a compiled class.
type class struct {
	Class
	index     int
	hourly    money.Nanos
	windows   *schedule.Schedule
	loc       *time.Location
	asks      *pricing.Asks // nil: the flat ask
	in, out   money.Price
	continues bool
	level     matcher.Level
	gold      int       // gold slots, of the simulated slots
	slots     int       // simulated slots a model: MaxConcurrent ÷ the run's weight
	regions   []string  // sorted
	regionCDF []float64 // cumulative weights of regions
}

func (c Class) compile(i int) (*class, error) {
	k := &class{Class: c, index: i}
	where := fmt.Sprintf("classes[%d] (%s)", i, c.Name)
	if c.Name == "" {
		return nil, fmt.Errorf("classes[%d]: no name", i)
	}
	if k.GPU == "" {
		k.GPU = c.Name
	}
	if c.Count < 0 {
		return nil, fmt.Errorf("%s: count must not be negative", where)
	}
	if len(c.Models) == 0 {
		return nil, fmt.Errorf("%s: no models", where)
	}
	if k.MaxConcurrent <= 0 {
		k.MaxConcurrent = 4
	}
	if !(c.GoldShare >= 0 && c.GoldShare <= 1) {
		return nil, fmt.Errorf("%s: gold_share must be between 0 and 1", where)
	}
	// As the agent rounds it (agent.goldSlots).
	k.gold = min(int(math.Round(c.GoldShare*float64(k.MaxConcurrent))), k.MaxConcurrent)
	k.slots = k.MaxConcurrent
	k.continues = c.Continues == nil || *c.Continues
	if c.TokensPerSecond <= 0 {
		return nil, fmt.Errorf("%s: tokens_per_second must be above 0", where)
	}
	if k.TTFT <= 0 {
		k.TTFT = 300 * time.Millisecond
	}
	if k.Drain <= 0 {
		k.Drain = 10 * time.Minute
	}
	if k.Reconnect <= 0 {
		k.Reconnect = 30 * time.Second
	}
	if k.Reliability == 0 {
		k.Reliability = 0.95
	}
	if !(k.Reliability > 0 && k.Reliability <= 1) || c.DropsPerDay < 0 || !(c.AskSpread >= 0 && c.AskSpread < 1) {
		return nil, fmt.Errorf("%s: want reliability in (0, 1], drops_per_day ≥ 0 and ask_spread in [0, 1)", where)
	}
	switch c.Level {
	case "", "verified":
		k.level = matcher.Verified
	case "trusted":
		k.level = matcher.Trusted
	default:
		return nil, fmt.Errorf("%s: level %q is not verified or trusted", where, c.Level)
	}
	if k.Provider == "" {
		k.Provider = c.Name
	}
	if c.HourlyUSD != "" {
		h, err := money.ParseUSD(c.HourlyUSD)
		if err != nil || h < 0 {
			return nil, fmt.Errorf("%s: hourly_usd: %q is not an amount of USD", where, c.HourlyUSD)
		}
		k.hourly = h
	}
	var err error
	if k.loc, err = location(c.Timezone); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if k.windows, err = schedule.Parse(c.Windows, k.loc); err != nil {
		return nil, fmt.Errorf("%s: windows: %w", where, err)
	}
	if err := k.compileRegions(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := k.compilePrice(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	for _, m := range c.Models {
		if err := k.fits(m); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return k, nil
}

// fits checks that a model fits the class's GPU memory, as the agent checks it before it
// offers a model (hw.Check): a node joins only the queues its VRAM fits.
func (k *class) fits(model string) error {
	if k.VRAMGB <= 0 {
		return nil
	}
	params, _ := hw.ParseParameters(model)
	spec := hw.ModelSpec{Name: model, Parameters: params, Quantization: k.Quantization, Parallel: k.MaxConcurrent}
	return hw.Check(spec, int64(k.VRAMGB*1024))
}

func (k *class) compileRegions() error {
	weights := k.Regions
	if len(weights) == 0 {
		weights = map[string]float64{k.Region: 1}
	} else if k.Region != "" {
		return errors.New("set region or regions, not both")
	}
	total := 0.0
	for _, r := range sortedKeys(weights) {
		w := weights[r]
		if !(w > 0) {
			return fmt.Errorf("region %q: a weight must be above 0", r)
		}
		total += w
		k.regions = append(k.regions, strings.ToLower(r))
		k.regionCDF = append(k.regionCDF, total)
	}
	for i := range k.regionCDF {
		k.regionCDF[i] /= total
	}
	return nil
}

// compilePrice reads the class's ask and its schedule as a provider file's are read (the
// flat ask by default "0.05" and "0.10", as the agent's flags), and compiles the schedule as
// the fleet does (pricing.Compile).
func (k *class) compilePrice() error {
	in, err := priceOr(k.Price.Input, "0.05")
	if err != nil {
		return fmt.Errorf("price.input: %w", err)
	}
	out, err := priceOr(k.Price.Output, "0.10")
	if err != nil {
		return fmt.Errorf("price.output: %w", err)
	}
	k.in, k.out = in, out
	s := k.Schedule
	if s == nil && len(k.Price.Windows) > 0 {
		zone := k.Price.Timezone
		if zone == "" {
			zone = k.loc.String()
		}
		s = &protocol.AskSchedule{Timezone: zone}
		for i, w := range k.Price.Windows {
			win := protocol.AskWindow{Name: w.Name, When: w.When, InputPrice: int64(in), OutputPrice: int64(out)}
			if w.Input != "" {
				p, err := money.ParsePrice(w.Input)
				if err != nil {
					return fmt.Errorf("price.windows[%d].input: %w", i, err)
				}
				win.InputPrice = int64(p)
			}
			if w.Output != "" {
				p, err := money.ParsePrice(w.Output)
				if err != nil {
					return fmt.Errorf("price.windows[%d].output: %w", i, err)
				}
				win.OutputPrice = int64(p)
			}
			s.Windows = append(s.Windows, win)
		}
	}
	if k.asks, err = pricing.Compile(s); err != nil {
		return fmt.Errorf("price: %w", err)
	}
	return nil
}

func priceOr(s, def string) (money.Price, error) {
	if s == "" {
		s = def
	}
	return money.ParsePrice(s)
}

func location(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: not an IANA time zone", name)
	}
	return loc, nil
}

// stream is a compiled stream.
type stream struct {
	Stream
	index  int
	models []string // Model, then Fallbacks
	loc    *time.Location
	daily  [25]float64 // Daily with the first hour repeated at 24, for interpolation
	weekly [7]float64  // Monday first
	bursts []burst
	peak   float64 // the highest rate, requests per second
	prefs  matcher.Prefs
	tiers  [3]float64 // cumulative shares of gold, silver, bronze
	keys   int

	dedicatedClass *class // what it is compared against; nil: none has an hourly price
}

type burst struct {
	open   *schedule.Schedule
	factor float64
}

func (s Stream) compile(i int) (*stream, error) {
	where := fmt.Sprintf("streams[%d] (%s)", i, s.Name)
	st := &stream{Stream: s, index: i}
	if s.Name == "" {
		return nil, fmt.Errorf("streams[%d]: no name", i)
	}
	if s.Model == "" {
		return nil, fmt.Errorf("%s: no model", where)
	}
	st.models = append([]string{s.Model}, s.Fallbacks...)
	if !(s.Rate >= 0) {
		return nil, fmt.Errorf("%s: rate must not be negative", where)
	}
	var err error
	if st.loc, err = location(s.Timezone); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	switch len(s.Daily) {
	case 0:
		for h := range st.daily {
			st.daily[h] = 1
		}
	case 24:
		copy(st.daily[:], s.Daily)
		st.daily[24] = s.Daily[0]
	default:
		return nil, fmt.Errorf("%s: daily holds 24 values, one per hour, not %d", where, len(s.Daily))
	}
	switch len(s.Weekly) {
	case 0:
		st.weekly = [7]float64{1, 1, 1, 1, 1, 1, 1}
	case 7:
		copy(st.weekly[:], s.Weekly)
	default:
		return nil, fmt.Errorf("%s: weekly holds 7 values, Monday first, not %d", where, len(s.Weekly))
	}
	maxDaily, maxWeekly, maxBurst := 0.0, 0.0, 1.0
	for _, v := range st.daily {
		if !(v >= 0) {
			return nil, fmt.Errorf("%s: daily values must not be negative", where)
		}
		maxDaily = max(maxDaily, v)
	}
	for _, v := range st.weekly {
		if !(v >= 0) {
			return nil, fmt.Errorf("%s: weekly values must not be negative", where)
		}
		maxWeekly = max(maxWeekly, v)
	}
	for j, b := range s.Bursts {
		open, err := schedule.Parse(b.When, st.loc)
		if err != nil || b.When == "" {
			return nil, fmt.Errorf("%s: bursts[%d]: want a weekly window such as \"tue 14:00-14:30\" (%v)", where, j, err)
		}
		if !(b.Factor > 0) {
			return nil, fmt.Errorf("%s: bursts[%d]: factor must be above 0", where, j)
		}
		st.bursts = append(st.bursts, burst{open, b.Factor})
		maxBurst *= max(b.Factor, 1)
	}
	st.peak = s.Rate * maxDaily * maxWeekly * maxBurst
	if err := checkLength(s.PromptTokens); err != nil {
		return nil, fmt.Errorf("%s: prompt_tokens: %w", where, err)
	}
	if err := checkLength(s.AnswerTokens); err != nil {
		return nil, fmt.Errorf("%s: answer_tokens: %w", where, err)
	}
	if st.tiers, err = tierShares(s.Tiers); err != nil {
		return nil, fmt.Errorf("%s: tiers: %w", where, err)
	}
	if st.prefs, err = prefsOf(s.Provider); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	st.keys = s.Keys
	if st.keys <= 0 {
		st.keys = 100
	}
	return st, nil
}

// prefsOf reads routing preferences as the API reads a request's provider object
// (matcher.ParsePrefs).
func prefsOf(m map[string]any) (matcher.Prefs, error) {
	if len(m) == 0 {
		return matcher.Prefs{}, nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return matcher.Prefs{}, fmt.Errorf("provider: %w", err)
	}
	return matcher.ParsePrefs(raw)
}

func checkLength(l Length) error {
	if !(l.Mean >= 1) || !(l.CV >= 0) || l.Max < 0 {
		return errors.New("want a mean of at least 1, a cv of at least 0 and a max of at least 0")
	}
	return nil
}

// tierShares reads the tier mix as cumulative shares in the order gold, silver, bronze.
func tierShares(m map[string]float64) ([3]float64, error) {
	var shares [3]float64
	if len(m) == 0 {
		return [3]float64{0, 1, 1}, nil
	}
	total := 0.0
	var by [3]float64
	for name, v := range m {
		t, err := tier.Parse(name)
		if err != nil {
			return shares, err
		}
		if !(v >= 0) {
			return shares, fmt.Errorf("%s: a share must not be negative", name)
		}
		by[tierIndex(t)] += v
		total += v
	}
	if !(total > 0) {
		return shares, errors.New("the shares add up to nothing")
	}
	acc := 0.0
	for i := range by {
		acc += by[i] / total
		shares[i] = acc
	}
	shares[2] = 1
	return shares, nil
}

// tierIndex orders the tiers as reports list them: gold, silver, bronze.
func tierIndex(t tier.Tier) int { return t.Rank() }

// batch is a compiled batch.
type batch struct {
	Batch
	index  int
	at     *schedule.Schedule
	prefs  matcher.Prefs
	window time.Duration
}

func (b Batch) compile(i int) (*batch, error) {
	where := fmt.Sprintf("batches[%d] (%s)", i, b.Name)
	if b.Name == "" || b.Model == "" {
		return nil, fmt.Errorf("batches[%d]: a batch has a name and a model", i)
	}
	if b.Lines <= 0 {
		return nil, fmt.Errorf("%s: lines must be at least 1", where)
	}
	loc, err := location(b.Timezone)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	at, err := schedule.Parse(b.At, loc)
	if err != nil || strings.TrimSpace(b.At) == "" || b.At == "always" {
		return nil, fmt.Errorf("%s: at: want weekly windows whose openings submit the batch, such as \"daily 01:00-01:01\" (%v)", where, err)
	}
	k := &batch{Batch: b, index: i, at: at, window: b.CompletionWindow}
	if k.window <= 0 {
		k.window = 24 * time.Hour
	}
	if err := checkLength(b.PromptTokens); err != nil {
		return nil, fmt.Errorf("%s: prompt_tokens: %w", where, err)
	}
	if err := checkLength(b.AnswerTokens); err != nil {
		return nil, fmt.Errorf("%s: answer_tokens: %w", where, err)
	}
	if k.prefs, err = prefsOf(b.Provider); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return k, nil
}

package shareai_test

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The architecture's import rules (docs/architecture.md, "Packages"), held over the real build
// graph: what `go list -deps` says every package of the module links, at any depth, standard
// library and third-party packages included, on each platform the programs run on. As in
// tailscale's tstest/deptest, every forbidden import carries the reason printed when it is
// broken. A rule that has gone stale fails too: a package that no longer exists, a forbidden
// import that names nothing in the standard library, the module or its module graph (a typo, a
// dependency removed), an exception the package no longer needs.

const mod = "github.com/shareai/shareai"

// in is the import path of the module's package p ("internal/fleet"), or of a pattern of them
// ("internal/store/...").
func in(p string) string { return mod + "/" + p }

// A rule holds the imports of one package of the module, or of every package a pattern names.
// Paths are import paths, exact or "path/..." for path and every package below it.
type rule struct {
	pkg     string   // relative to the module's root: "internal/matcher", "internal/engine/..."
	not     []string // packages of pkg's pattern the rule leaves out
	bad     []dep    // forbidden imports, at any depth, each with why
	stdOnly string   // when set: why pkg may import only the standard library (and allow)
	allow   []string // imports that neither bad nor stdOnly forbid; each must be imported
	want    []string // imports pkg must have: proof that the rule looks at the graph it means
}

type dep struct{ path, why string }

func forbid(why string, paths ...string) []dep {
	d := make([]dep, len(paths))
	for i, p := range paths {
		d[i] = dep{p, why}
	}
	return d
}

var (
	// networking is every way out of the process: package net is under all of the standard
	// library's (net/http, crypto/tls, net/rpc, net/smtp, …) and the third-party stacks'.
	networking = []string{"net", "net/http/...", "crypto/tls/...", "golang.org/x/net/...",
		"github.com/coder/websocket/...", "google.golang.org/grpc/...", "github.com/nats-io/..."}
	// stacks are the network stacks besides the standard library's net/http, for the packages
	// that use net/http's types (api, relay, tracing) and so link net and crypto/tls through it.
	stacks = []string{"golang.org/x/net/...", "github.com/coder/websocket/...", "google.golang.org/grpc/...", "github.com/nats-io/..."}
	// databases are the SQL pool, its drivers and the store's implementation on them.
	databases = []string{"database/sql", "github.com/jackc/pgx/v5/...", "modernc.org/sqlite/...",
		in("internal/store/sqlstore/...")}
	// exporters are the telemetry SDKs and exporters: OpenTelemetry's SDK, its OTLP exporters
	// and wire types, Prometheus.
	exporters = []string{"go.opentelemetry.io/otel/sdk/...", "go.opentelemetry.io/otel/exporters/...",
		"go.opentelemetry.io/proto/otlp/...", "github.com/prometheus/..."}
	// otelExport is the part of exporters that only a program's main sets up
	// (internal/tracing/otlp); library packages link OpenTelemetry's API alone.
	otelExport = exporters[:3]
	// coordinatorSide are the packages of the coordinator: its state, its live fleet, its
	// buyer API and what only it runs.
	coordinatorSide = []string{in("internal/store/..."), in("internal/ledger"), in("internal/fleet"),
		in("internal/core"), in("internal/gateway"), in("internal/relay"), in("internal/matcher"), in("internal/queue"),
		in("internal/bus"), in("internal/mesh"),
		in("internal/console"), in("internal/verify"), in("internal/reputation"), in("internal/report"),
		in("internal/meter"), in("internal/coordinator"), in("internal/localnet"), in("internal/testenv")}
)

const (
	whyAgentSide  = "the agent runs on providers' machines and speaks to the coordinator only in protocol frames: it must never link the coordinator's packages"
	whyEngineSide = "an engine is a backend behind engine.Engine, driven by the agent: it links neither the agent nor the coordinator's packages"
	whyOTLP       = "only cmd/shareai sets up trace export (internal/tracing/otlp); libraries take a trace.TracerProvider and link OpenTelemetry's API alone, so propagation stays light"
)

func pure(why string) []dep {
	return slices.Concat(forbid(why+": no networking", networking...), forbid(why+": no database", databases...),
		forbid(why+": no exporter", exporters...))
}

var rules = []rule{
	// The pure packages: no networking, database or exporter at any depth.
	{pkg: "internal/matcher", bad: slices.Concat(pure("the matcher is a pipeline — filter, rank, pick — over a snapshot, randomness handed in"),
		forbid("the matcher ranks the offers it is handed: the live fleet (its WebSocket sessions), the ledger and the gateway call it, not it them",
			in("internal/fleet"), in("internal/gateway"), in("internal/relay"), in("internal/ledger"), in("internal/queue"),
			in("internal/console"), in("internal/verify"), in("internal/coordinator"), in("internal/localnet"), in("internal/testenv")))},
	{pkg: "internal/relay", bad: slices.Concat(
		forbid("relay writes one answer to net/http's ResponseWriter (its one exception, which links net and crypto/tls); it links no other network stack", stacks...),
		forbid("relay does no database work: the gateway prices and bills through its callback", databases...),
		forbid("relay links no exporter", exporters...),
		forbid("relay reads a job through relay.Frames; the gateway hands it the job, the fleet's, and the price callback",
			in("internal/store/..."), in("internal/fleet"), in("internal/gateway"), in("internal/ledger"), in("internal/matcher"),
			in("internal/queue"), in("internal/console"), in("internal/verify"), in("internal/coordinator")))},
	{pkg: "internal/protocol", stdOnly: "protocol is the wire format that the coordinator and the agent both compile: the standard library, and jsondec to read it",
		allow: []string{in("internal/jsondec")}, bad: pure("protocol's frames are values; the session that sends them lives in fleet and agent")},
	{pkg: "internal/jsondec", stdOnly: "jsondec reads JSON from bytes: the standard library only",
		bad: pure("jsondec decodes bytes it is given")},
	{pkg: "internal/api", stdOnly: "api is the OpenAI wire format that the gateway, the engines and the console share: the standard library, money and protocol (with its jsondec) only",
		allow: []string{in("internal/money"), in("internal/protocol"), in("internal/jsondec")}, bad: slices.Concat(
			forbid("api uses net/http for status codes, http.MaxBytesError and writing an error (its exception, which links net and crypto/tls); it links no other network stack", stacks...),
			forbid("api's types do no database work", databases...),
			forbid("api links no exporter", exporters...),
			forbid("api is below the coordinator: the gateway imports it, not the other way round",
				in("internal/store/..."), in("internal/fleet"), in("internal/gateway")))},
	{pkg: "internal/roulette", bad: slices.Concat(
		forbid("roulette is arithmetic over splits and the store's records: it reads no database", databases...),
		forbid("the core draws with roulette, the gateway and the console compare with it: it calls none of them",
			in("internal/core"), in("internal/gateway"), in("internal/console"), in("internal/fleet"), in("internal/ledger"))),
		want: []string{in("internal/api"), in("internal/store")}},
	{pkg: "internal/money", stdOnly: "money is integer arithmetic on nano-dollars: the standard library only",
		bad: pure("money is arithmetic")},
	{pkg: "internal/reputation", stdOnly: "reputation computes a score from a node's record: the standard library, and store for the level names (store imports money)",
		allow: []string{in("internal/store"), in("internal/money")}, bad: pure("reputation is a function of a record the prober reads for it")},
	{pkg: "internal/schedule", stdOnly: "schedule is weekly windows on a wall clock: the standard library only",
		bad: pure("schedule is calendar arithmetic")},
	{pkg: "internal/guard", stdOnly: "guard is a state machine fed readings and a clock: the standard library and protocol (with its jsondec) only",
		allow: []string{in("internal/protocol"), in("internal/jsondec")}, bad: pure("guard's readings come from hw through the agent")},

	// The agent's side never reaches the coordinator's.
	{pkg: "internal/agent", bad: forbid(whyAgentSide, coordinatorSide...)},
	{pkg: "internal/engine/...", bad: forbid(whyEngineSide, append(slices.Clone(coordinatorSide), in("internal/agent"))...)},

	// Tracing: propagation is light, for every library package (the agent, the engines, the
	// fleet, the gateway); the exporter is set up by the program alone.
	{pkg: "internal/...", not: []string{in("internal/tracing/otlp")}, bad: forbid(whyOTLP, otelExport...)},
	{pkg: "internal/tracing", bad: slices.Concat(forbid("tracing is below every package that traces", in("internal/...")),
		forbid("tracing carries context in HTTP headers (net/http's types) but links no network stack", stacks...)),
		want: []string{"go.opentelemetry.io/otel/propagation"}},
	{pkg: "internal/tracing/otlp", bad: forbid("otlp is the program's export set-up: it depends on nothing of the network's", in("internal/...")),
		want: []string{"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp", "go.opentelemetry.io/otel/sdk/trace"}},
	{pkg: "cmd/shareai", want: []string{in("internal/tracing/otlp")}},

	// The rest of the packages table.
	{pkg: "internal/store", stdOnly: "store is records and interfaces, shared by the coordinator's packages: the standard library and money only",
		allow: []string{in("internal/money")}, bad: forbid("the database is store/sqlstore's; store itself links none", databases...)},
	{pkg: "internal/store/sqlstore", bad: forbid("sqlstore implements store.Store on SQL: it knows no other coordinator package",
		slices.DeleteFunc(slices.Clone(coordinatorSide), func(p string) bool { return p == in("internal/store/...") })...)},
	{pkg: "internal/meter", bad: forbid("meter counts the tokens of text: it knows nothing else of the network", in("internal/..."))},
	{pkg: "internal/ledger", bad: forbid("the gateway calls the ledger, and the fleet is not the ledger's business",
		in("internal/gateway"), in("internal/fleet"), in("internal/relay"))},
	{pkg: "internal/fleet", bad: forbid("the fleet is the live nodes: the gateway uses it, and billing is the ledger's, through the gateway",
		in("internal/gateway"), in("internal/relay"), in("internal/ledger"))},
	{pkg: "internal/receipt", stdOnly: "receipts are verified offline by buyers (shareai receipt verify): the standard library, protocol and jsondec only",
		allow: []string{in("internal/protocol"), in("internal/jsondec")}},
	{pkg: "internal/keyfile", stdOnly: "keyfile is an ed25519 key in a PEM file, for the node and the coordinator: the standard library only"},
	{pkg: "internal/console", bad: forbid("the console is the coordinator's web pages: it reads the store and the fleet, never the agent", in("internal/agent"))},
	{pkg: "internal/aside", stdOnly: "aside runs a call on a goroutine of its own: the standard library only"},
	{pkg: "internal/metrics", allow: []string{in("internal/money"), in("internal/protocol"), in("internal/jsondec")},
		bad: forbid("the agent imports metrics: it must not bring the coordinator's packages onto providers' machines", in("internal/..."))},
	{pkg: "internal/hw", stdOnly: "hw reads GPUs through a Runner: the standard library and protocol (with its jsondec) only",
		allow: []string{in("internal/protocol"), in("internal/jsondec")}},
	{pkg: "internal/report", stdOnly: "report is pure arithmetic over a node's record: the standard library, store, money and schedule only",
		allow: []string{in("internal/store"), in("internal/money"), in("internal/schedule")}},
	{pkg: "internal/verify", bad: forbid("the prober runs its probes through the request core, pinned to the node it checks: it is neither the gateway nor an agent",
		in("internal/gateway"), in("internal/agent")), want: []string{in("internal/core")}},
	{pkg: "internal/core", bad: slices.Concat(
		forbid("the request core knows nothing of its callers: the gateway (HTTP), the console's playground and the prober call it, with a sink for the answer",
			in("internal/gateway"), in("internal/console"), in("internal/verify"), in("internal/coordinator"), in("internal/localnet"),
			in("internal/testenv"), in("internal/agent")),
		forbid("the core's records go through store.Store; the drivers are store/sqlstore's", databases[1:]...))},
	{pkg: "internal/mesh", bad: forbid("the mesh shares the fleet between replicas: the request core, the gateway and the console run on top of it, never under it",
		in("internal/core"), in("internal/gateway"), in("internal/console"), in("internal/verify"), in("internal/coordinator")),
		want: []string{in("internal/bus"), "github.com/nats-io/nats.go/jetstream"}},
	{pkg: "internal/ops", bad: forbid("the operations are the store's transactions, which the console and cmd/shareai call: they take the live fleet as an interface, and know neither caller",
		in("internal/console"), in("internal/gateway"), in("internal/fleet"), in("internal/core"), in("cmd/..."))},
	{pkg: "internal/console", bad: forbid("the console's playground runs a chat through the request core, for the signed-in account: never through the buyer API's handler",
		in("internal/gateway"))},
	// The simulator drives the coordinator's own decision and money code in virtual time: it
	// links the matcher, the queue, the tiers, the prices, the windows and the ledger, and
	// nothing of the live network, so that what it measures is theirs and no copy of them.
	{pkg: "internal/simulate", bad: slices.Concat(
		forbid("the simulator runs the coordinator's pure parts on a virtual clock: it links none of the live coordinator (sessions, the request core, the buyer API, the agent)",
			in("internal/fleet"), in("internal/core"), in("internal/gateway"), in("internal/relay"), in("internal/console"), in("internal/coordinator"),
			in("internal/localnet"), in("internal/testenv"), in("internal/agent"), in("internal/batch"), in("internal/verify"), in("internal/mesh"),
			in("internal/bus"), in("internal/config")),
		forbid("the simulator opens no connection: net/http comes only with the ledger's metrics types", stacks...),
		forbid("the simulator keeps no database: the ledger prices in memory", databases[1:]...)),
		want: []string{in("internal/matcher"), in("internal/queue"), in("internal/tier"), in("internal/pricing"), in("internal/schedule"),
			in("internal/ledger"), in("internal/money"), in("internal/hw")}},
}

// platforms are those the programs are built for: the coordinator on Linux, the agent on
// providers' Linux, macOS and Windows machines.
var platforms = []struct{ goos, goarch string }{{"linux", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}

func TestDeps(t *testing.T) {
	for _, p := range checkDeps(t, rules) {
		t.Error(p)
	}
}

// The check bites: a forbidden import at any depth is reported with its chain and reason, as
// is a package outside the standard library, an import wanted and missing, and an exception
// not needed.
func TestDeps_Bites(t *testing.T) {
	got := checkDeps(t, []rule{
		{pkg: "internal/gateway", bad: forbid("reason one", "github.com/coder/websocket/...")},
		{pkg: "internal/meter", stdOnly: "reason two"},
		{pkg: "internal/money", stdOnly: "reason three", allow: []string{in("internal/protocol")}, want: []string{"net"}},
	})
	want := []string{
		"internal/gateway imports github.com/coder/websocket (internal/gateway → internal/fleet → github.com/coder/websocket, and ",
		"more under github.com/coder/websocket/...): reason one",
		"internal/meter imports ",
		"(internal/meter → github.com/tiktoken-go/tokenizer/codec",
		"internal/money does not import net on linux/amd64",
		"it allows internal/protocol, which it no longer imports",
	}
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("problems do not say %q; they are:\n%s", w, all)
		}
	}
	if len(got) != 6 { // the want fails on each of the three platforms
		t.Errorf("%d problems, want 6:\n%s", len(got), all)
	}
}

// A stale rule fails: a package gone, and forbidden imports that name nothing, in the module,
// the standard library or go.mod's module graph; those that exist but are not linked pass.
func TestDeps_Stale(t *testing.T) {
	got := checkDeps(t, []rule{
		{pkg: "internal/nosuch", bad: forbid("x", "net")},
		{pkg: "internal/money", not: []string{in("internal/protocol")}, bad: forbid("x",
			"net/smtp", "net/htp", in("internal/nosuch"), "github.com/coder/websokcet", "github.com/coder/websocket/wsjsn",
			"github.com/nats-io/nosuch/...", "github.com/coder/websocket/wsjson", "go.opentelemetry.io/otel/sdk/metric/...")},
	})
	all := strings.Join(got, "\n")
	for _, w := range []string{
		"no package internal/nosuch in the module",
		"it leaves out internal/protocol, which it does not name",
		"net/htp names no package in the standard library",
		in("internal/nosuch") + " names no package in the module",
		"github.com/coder/websokcet names no package in go.mod's module graph",
		"github.com/coder/websocket/wsjsn names no package in its module",
		"github.com/nats-io/nosuch/... names no package in go.mod's module graph",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("problems do not say %q; they are:\n%s", w, all)
		}
	}
	for _, live := range []string{"net/smtp ", "wsjson ", "sdk/metric/... "} {
		if strings.Contains(all, live) {
			t.Errorf("%s is called stale: %s", live, all)
		}
	}
	if len(got) != 7 {
		t.Errorf("%d problems, want 7:\n%s", len(got), all)
	}
}

// graph is the build graph of the module's packages on one platform.
type graph struct {
	platform string
	std      map[string]bool     // the standard library's packages in it
	imports  map[string][]string // every package's direct imports
}

var loadGraphs = sync.OnceValues(func() ([]*graph, error) {
	graphs := make([]*graph, len(platforms))
	errs := make([]error, len(platforms))
	var wg sync.WaitGroup
	for i, pl := range platforms {
		wg.Go(func() {
			out, err := goCmd([]string{"GOOS=" + pl.goos, "GOARCH=" + pl.goarch},
				"list", "-deps", "-f", "{{.ImportPath}}\t{{.Standard}}\t{{join .Imports \" \"}}", "./...")
			if err != nil {
				errs[i] = err
				return
			}
			g := &graph{platform: pl.goos + "/" + pl.goarch, std: map[string]bool{}, imports: map[string][]string{}}
			for line := range strings.Lines(string(out)) {
				f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
				if len(f) != 3 {
					errs[i] = fmt.Errorf("go list: unexpected line %q", line)
					return
				}
				g.std[f[0]] = f[1] == "true"
				g.imports[f[0]] = slices.DeleteFunc(strings.Fields(f[2]), func(p string) bool { return p == "C" }) // cgo
			}
			graphs[i] = g
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return graphs, nil
})

var errNoGo = fmt.Errorf("go command not found")

// goCmd runs the go command in the module's root with env added to the environment.
func goCmd(env []string, args ...string) ([]byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, errNoGo
	}
	cmd := exec.Command(goBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s go %s: %v\n%s", strings.Join(env, " "), strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// match reports whether path is pattern, or lies under it when pattern ends in "/...".
func match(pattern, path string) bool {
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == p || strings.HasPrefix(path, p+"/")
	}
	return path == pattern
}

// reach returns every package pkg imports at any depth, each mapped to the package that
// imports it on a shortest path from pkg.
func (g *graph) reach(pkg string) map[string]string {
	from := map[string]string{}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range g.imports[p] {
			if _, ok := from[q]; !ok && q != pkg {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return from
}

// chain is the import path from pkg to dep, the module's own packages shortened.
func chain(from map[string]string, pkg, dep string) string {
	links := []string{short(dep)}
	for p := dep; p != pkg; {
		p = from[p]
		links = append(links, short(p))
	}
	slices.Reverse(links)
	return strings.Join(links, " → ")
}

func short(p string) string { return strings.TrimPrefix(p, mod+"/") }

// checkDeps returns what breaks rules on the build graphs, and each stale rule.
func checkDeps(t *testing.T, rules []rule) []string {
	t.Helper()
	graphs, err := loadGraphs()
	if err == errNoGo {
		t.Skip("no go command to list the build graph with")
	}
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	var patterns []string // forbidden imports, to check they name something
	for _, r := range rules {
		pkgs := map[string]bool{}
		for _, g := range graphs {
			for p := range g.imports {
				if match(in(r.pkg), p) && !slices.Contains(r.not, p) {
					pkgs[p] = true
				}
			}
		}
		if len(pkgs) == 0 {
			problems = append(problems, fmt.Sprintf("stale rule: no package %s in the module: update the rules (and docs/architecture.md)", r.pkg))
			continue
		}
		for _, p := range r.not {
			if !match(in(r.pkg), p) || !slices.ContainsFunc(graphs, func(g *graph) bool { _, ok := g.imports[p]; return ok }) {
				problems = append(problems, fmt.Sprintf("stale rule for %s: it leaves out %s, which it does not name", r.pkg, short(p)))
			}
		}
		seen := map[string]bool{}
		for _, d := range r.bad {
			if seen[d.path] {
				problems = append(problems, fmt.Sprintf("rule for %s forbids %s twice", r.pkg, d.path))
			}
			seen[d.path] = true
			patterns = append(patterns, d.path)
		}
		allowed := map[string]bool{}
		for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
			problems = append(problems, checkPkg(graphs, r, pkg, allowed)...)
		}
		for _, a := range r.allow {
			if !allowed[a] {
				problems = append(problems, fmt.Sprintf("stale rule for %s: it allows %s, which it no longer imports: drop the exception", r.pkg, short(a)))
			}
		}
	}
	return append(problems, stalePatterns(t, graphs, patterns)...)
}

// checkPkg checks one package against its rule on every graph, and notes in allowed the
// rule's exceptions that it uses.
func checkPkg(graphs []*graph, r rule, pkg string, allowed map[string]bool) []string {
	type hit struct {
		dep, chain string
		n          int      // packages under the pattern reached
		on         []string // platforms
	}
	hits := map[string]*hit{} // bad path, or "" for stdOnly → the first hit
	var order []string
	note := func(key, dep, ch string, n int, platform string) {
		h := hits[key]
		if h == nil {
			h = &hit{dep: dep, chain: ch, n: n}
			hits[key] = h
			order = append(order, key)
		}
		h.on = append(h.on, platform)
	}
	var problems []string
	for _, g := range graphs {
		if _, ok := g.imports[pkg]; !ok {
			continue // not built on this platform
		}
		from := g.reach(pkg)
		deps := slices.Sorted(maps.Keys(from))
		for _, w := range r.want {
			if !slices.ContainsFunc(deps, func(d string) bool { return match(w, d) }) {
				problems = append(problems, fmt.Sprintf("%s does not import %s on %s, which its rule wants: the rule no longer looks at the graph it means", short(pkg), short(w), g.platform))
			}
		}
		reported := map[string]bool{}
		for _, d := range r.bad {
			var best string
			n := 0
			for _, dep := range deps {
				if !match(d.path, dep) || isAllowed(r, dep, allowed) {
					continue
				}
				n++
				reported[dep] = true
				if best == "" || len(chain(from, pkg, dep)) < len(chain(from, pkg, best)) {
					best = dep
				}
			}
			if best != "" {
				note(d.path, best, chain(from, pkg, best), n, g.platform)
			}
		}
		if r.stdOnly != "" {
			var outside []string
			for _, dep := range deps {
				if !g.std[dep] && !reported[dep] && !isAllowed(r, dep, allowed) {
					outside = append(outside, dep)
				}
			}
			if len(outside) > 0 {
				var b strings.Builder
				for i, dep := range outside {
					if i == 3 {
						fmt.Fprintf(&b, ", and %d more", len(outside)-3)
						break
					}
					if i > 0 {
						b.WriteString(", ")
					}
					b.WriteString(chain(from, pkg, dep))
				}
				note("", outside[0], b.String(), len(outside), g.platform)
			}
		}
	}
	for _, key := range order {
		h := hits[key]
		on := ""
		if len(h.on) < len(graphs) {
			on = " on " + strings.Join(h.on, ", ")
		}
		if key == "" {
			problems = append(problems, fmt.Sprintf("%s imports %d package(s) outside the standard library%s (%s): %s", short(pkg), h.n, on, h.chain, r.stdOnly))
			continue
		}
		more := ""
		if h.n > 1 {
			more = fmt.Sprintf(", and %d more under %s", h.n-1, key)
		}
		why := ""
		for _, d := range r.bad {
			if d.path == key {
				why = d.why
			}
		}
		problems = append(problems, fmt.Sprintf("%s imports %s%s (%s%s): %s", short(pkg), short(h.dep), on, h.chain, more, why))
	}
	return problems
}

func isAllowed(r rule, dep string, allowed map[string]bool) bool {
	for _, a := range r.allow {
		if match(a, dep) {
			allowed[a] = true
			return true
		}
	}
	return false
}

// stalePatterns returns the forbidden imports that name no package: none in the build graphs,
// the standard library, or (for third-party paths) the module graph of go.mod.
func stalePatterns(t *testing.T, graphs []*graph, patterns []string) []string {
	t.Helper()
	var rest []string
	for _, p := range slices.Compact(slices.Sorted(slices.Values(patterns))) {
		found := false
		for _, g := range graphs {
			for dep := range g.imports {
				if match(p, dep) {
					found = true
					break
				}
			}
		}
		if !found {
			rest = append(rest, p)
		}
	}
	if len(rest) == 0 {
		return nil
	}
	var problems []string
	stale := func(p, where string) {
		problems = append(problems, fmt.Sprintf("stale rule: %s names no package %s: a typo, or a package gone? update the rules", p, where))
	}
	var std, modules []string
	var exact []string // third-party packages to look up
	for _, p := range rest {
		first, _, _ := strings.Cut(p, "/")
		switch {
		case match(mod+"/...", p) || match(p, mod):
			stale(p, "in the module")
		case !strings.Contains(first, "."):
			if std == nil {
				out, err := goCmd(nil, "list", "std")
				if err != nil {
					t.Fatal(err)
				}
				std = strings.Fields(string(out))
			}
			if !slices.ContainsFunc(std, func(s string) bool { return match(p, s) }) {
				stale(p, "in the standard library")
			}
		default:
			if modules == nil {
				out, err := goCmd(nil, "list", "-m", "-f", "{{.Path}}", "all")
				if err != nil {
					t.Fatal(err)
				}
				modules = strings.Fields(string(out))
			}
			base, prefix := strings.CutSuffix(p, "/...")
			if !slices.ContainsFunc(modules, func(m string) bool {
				return match(m+"/...", base) || (prefix && match(p, m))
			}) {
				stale(p, "in go.mod's module graph")
			} else if !prefix {
				exact = append(exact, p)
			}
		}
	}
	if len(exact) > 0 {
		out, err := goCmd(nil, append([]string{"list", "-e", "-f", "{{.ImportPath}}\t{{if .Error}}!{{end}}"}, exact...)...)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if p, e, _ := strings.Cut(sc.Text(), "\t"); e != "" {
				stale(p, "in its module")
			}
		}
	}
	return problems
}

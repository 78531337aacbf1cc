package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shareai/shareai/internal/console"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// The first screen of a laptop: what a person sees of a page before scrolling.
const screenW, screenH = 1280, 800

// evalJS runs a script in the page and returns its value.
func evalJS[T any](t *testing.T, ctx context.Context, script string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](script))
	if err != nil {
		t.Fatalf("evaluate %s: %v", script, err)
	}
	return v
}

// shootScreen saves the first screen, as a person sees it before scrolling.
func shootScreen(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(screenshots(t), name+"-first-screen.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// open shows a page at the first screen's size, once sel is visible.
func open(t *testing.T, ctx context.Context, url, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(screenW, screenH), chromedp.Navigate(url), chromedp.WaitVisible(sel)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

// A provider with three nodes (long names, several offers) and earnings opens /provider on a
// laptop: the nodes table starts on the first screen, and the earnings chart's axis labels
// are drawn at the page's text size, not scaled up or down with the chart.
func TestBrowser_ProviderFirstScreen(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	prov := browser(t)
	signUp(t, prov, env.URL, "grace@example.com", "grace-gpus", "provider")
	account := mustAccountID(t, env, "grace-gpus")
	token, _, err := ops.CreateKey(ctx, env.Store, ops.NewKey{AccountID: account, Kind: store.KeyProvider, Name: "rig", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	a := startProviderAgent(t, env, token, "grace-workstation-rtx4090-basement-01")
	for range 3 {
		askNode(t, env, a.NodeID())
	}
	env.WaitFor("the jobs to be settled", func() bool {
		b, err := env.Store.Balance(ctx, account)
		return err == nil && b.Pending > 0
	})
	offers, _ := json.Marshal([]protocol.Offer{
		{Model: "meta-llama/Llama-3.3-70B-Instruct", InputPrice: 230_000_000, OutputPrice: 400_000_000, MaxConcurrent: 4},
		{Model: "Qwen/Qwen2.5-Coder-32B-Instruct", InputPrice: 75_000_000, OutputPrice: 150_000_000, MaxConcurrent: 2},
	})
	for i, name := range []string{"grace-datacenter-a100-rack-7-slot-3", "grace-laptop-4070-mobile-travel"} {
		err := env.Store.UpsertNode(ctx, &store.Node{ID: fmt.Sprintf("node_offline%02d", i), AccountID: account, Name: name, PublicKey: bytes.Repeat([]byte{byte(i + 1)}, 32),
			Region: "us-east-2", Engine: "vllm", Agent: "0.9.0", Offers: offers, FirstSeen: time.Now().Add(-72 * time.Hour), LastSeen: time.Now().Add(-time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
	}

	open(t, prov, env.URL+"/provider", "#nodes")
	if rows := evalJS[int](t, prov, `document.querySelectorAll("#nodes tr[data-node-id]").length`); rows != 3 {
		t.Fatalf("%d nodes on /provider, want 3", rows)
	}
	// The table's head and first node are on the first screen.
	bottom := evalJS[float64](t, prov, `document.querySelector("#nodes tbody tr").getBoundingClientRect().bottom`)
	if bottom > screenH {
		t.Errorf("the nodes table's first row ends at %.0f px, below the first screen (%d px)", bottom, screenH)
	}
	t.Logf("the nodes table's first row ends at %.0f px of %d", bottom, screenH)
	chartLabelsReadable(t, prov, "/provider")
	shootScreen(t, prov, "provider")
	shoot(t, prov, "provider-many-nodes")

	// The provider's other pages with charts: earnings, and a node's record and earnings.
	for path, sel := range map[string]string{"/provider/earnings": "#earnings-pending", "/provider/nodes/" + a.NodeID(): "#node-status"} {
		open(t, prov, env.URL+path, sel)
		chartLabelsReadable(t, prov, path)
		shoot(t, prov, "provider"+strings.ReplaceAll(strings.TrimPrefix(path, "/provider"), "/", "-"))
	}
}

// chartLabelsReadable checks the page's charts: every axis label is drawn at the body text's
// size (its computed size times the SVG's scale on the screen), within its chart, and no two
// overlap.
func chartLabelsReadable(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	type size struct{ Computed, Screen, Body float64 }
	sizes := evalJS[[]size](t, ctx, `Array.from(document.querySelectorAll(".chart-svg text.tick, .chart-svg text.label")).map(el => {
		const f = parseFloat(getComputedStyle(el).fontSize);
		return {Computed: f, Screen: f * el.ownerSVGElement.getScreenCTM().a, Body: parseFloat(getComputedStyle(document.body).fontSize)};
	})`)
	if len(sizes) < 4 {
		t.Fatalf("%s: %d axis labels in its charts, want their ticks and days", page, len(sizes))
	}
	t.Logf("%s: %d axis labels, the first %.1f px on the screen (body %.1f px)", page, len(sizes), sizes[0].Screen, sizes[0].Body)
	for _, s := range sizes {
		if s.Computed < s.Body || s.Screen < s.Body || s.Screen > 1.25*s.Body {
			t.Errorf("%s: an axis label is %.1f px on the screen (computed %.1f px), the body text %.1f px: want the text's size", page, s.Screen, s.Computed, s.Body)
			break
		}
	}
	bad := evalJS[[]string](t, ctx, `Array.from(document.querySelectorAll(".chart")).flatMap(chart => {
		const out = [], fig = chart.getBoundingClientRect();
		const boxes = Array.from(chart.querySelectorAll(".chart-svg text")).filter(el => getComputedStyle(el).display !== "none").map(el => [el.textContent, el.getBoundingClientRect()]);
		for (const [s, b] of boxes) if (b.left < fig.left - 1 || b.right > fig.right + 1) out.push(s + " outside its chart");
		for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
			const [s, a] = boxes[i], [u, b] = boxes[j];
			if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) out.push(s + " over " + u);
		}
		return out;
	})`)
	if len(bad) > 0 {
		t.Errorf("%s: chart labels: %v", page, bad)
	}
}

// A buyer's last hundred requests (long model names, node ids, every outcome and tier) fit a
// laptop's width: the table does not scroll sideways.
func TestBrowser_RequestsFitTheScreen(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	env := testenv.New(t)
	ctx := context.Background()
	buyer := browser(t)
	signUp(t, buyer, env.URL, "ada@example.com", "ada-labs", "buyer")
	account := mustAccountID(t, env, "ada-labs")
	_, key, err := ops.CreateKey(ctx, env.Store, ops.NewKey{AccountID: account, Kind: store.KeyBuyer, Name: "laptop", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	models := []string{"meta-llama/Llama-3.3-70B-Instruct-Turbo", "Qwen/Qwen2.5-Coder-32B-Instruct", "deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "sim/llama-3.1-8b"}
	outcomes := []string{store.OutcomeOK, store.OutcomeOK, store.OutcomeOK, store.OutcomeError, store.OutcomeCancelled, store.OutcomeRejected}
	tiers := []string{"gold", "silver", "bronze", ""}
	nodeIDs := []string{"node_sdtzh74ws3ywbjrb", "node_q7m2kx9vazp4hw3n", "node_b6ynr5tfe2ucl8jd"} // as fleet makes them
	var us []*store.Usage
	for i := range 100 {
		us = append(us, &store.Usage{RequestID: fmt.Sprintf("req_%026d", i), AccountID: account, KeyID: key.ID, Model: models[i%len(models)],
			NodeID: nodeIDs[i%len(nodeIDs)], Endpoint: "chat", Stream: i%2 == 0, PromptTokens: 1234 + i*97, CompletionTokens: 100_000 + i*13,
			TTFT: time.Duration(100+i) * time.Millisecond, Duration: time.Duration(12_345+i*1000) * time.Millisecond, Outcome: outcomes[i%len(outcomes)],
			Region: []string{"eu-west-1", "ap-southeast-2", "us-east-2"}[i%3], Cost: money.Nanos(1_234_567_891 * int64(i%5)),
			CreatedAt: time.Now().Add(-time.Duration(i) * 97 * time.Minute), ServiceTier: tiers[i%len(tiers)]})
	}
	if err := env.Store.InsertUsage(ctx, us); err != nil {
		t.Fatal(err)
	}
	for _, lang := range []string{"en", "fa"} {
		if lang == "fa" {
			if err := chromedp.Do(buyer, chromedp.SetValue("#lang", "fa"), chromedp.Click("#lang-submit"), chromedp.WaitVisible(`html[lang="fa"]`)); err != nil {
				t.Fatal(err)
			}
		}
		open(t, buyer, env.URL+"/buyer/requests", "#requests")
		if rows := evalJS[int](t, buyer, `document.querySelectorAll("#requests tr[data-request-id]").length`); rows != 100 {
			t.Fatalf("%s: %d requests listed, want 100", lang, rows)
		}
		// Neither the page nor the table's wrapper scrolls sideways, and the table ends inside both.
		wide := evalJS[map[string]float64](t, buyer, `(() => {
			const table = document.querySelector("#requests"), wrap = table.parentElement;
			return {table: table.getBoundingClientRect().right, tableScroll: table.scrollWidth, wrap: wrap.getBoundingClientRect().right,
				wrapScroll: wrap.scrollWidth, wrapClient: wrap.clientWidth, page: document.documentElement.scrollWidth, window: window.innerWidth};
		})()`)
		t.Logf("%s: requests table %.0f px wide in a wrapper of %.0f, window %.0f", lang, wide["tableScroll"], wide["wrapClient"], wide["window"])
		if wide["table"] > wide["wrap"] || wide["tableScroll"] > wide["wrapClient"] || wide["wrapScroll"] > wide["wrapClient"] || wide["page"] > wide["window"] {
			t.Errorf("%s: the requests table does not fit a %d px window: %v", lang, screenW, wide)
		}
		// Every column is there: a cut id keeps its whole value in its title.
		if cells := evalJS[int](t, buyer, `document.querySelectorAll("#requests tr[data-request-id] td").length / 100`); cells < 7 {
			t.Errorf("%s: %d columns per request, want time, model, node, tokens, latency, cost and outcome", lang, cells)
		}
		if title := evalJS[string](t, buyer, `document.querySelector("#requests tr[data-request-id] .node-id").title`); !strings.HasPrefix(title, "node_") {
			t.Errorf("%s: a node id's title %q, want the whole id", lang, title)
		}
		shootScreen(t, buyer, "buyer-requests-"+lang)
		shoot(t, buyer, "buyer-requests-100-"+lang)

		// The overview's six charts of the same requests, two to a row.
		open(t, buyer, env.URL+"/buyer", "#credits")
		chartLabelsReadable(t, buyer, lang+" /buyer")
		shoot(t, buyer, "buyer-overview-100-"+lang)
	}
}

// static/money.js writes money as funcs.go does: the same table.
func TestBrowser_MoneyScript(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	env := testenv.New(t)
	buyer := browser(t)
	signUp(t, buyer, env.URL, "ada@example.com", "ada-labs", "buyer")
	open(t, buyer, env.URL+"/buyer/playground", "#answer-cost")
	if ok := evalJS[bool](t, buyer, `typeof shareaiMoney === "function"`); !ok {
		t.Fatal("the playground has no shareaiMoney (static/money.js)")
	}
	for _, c := range console.MoneyCases() {
		for _, loc := range []struct{ lang, js, want string }{
			{"en", `{digits: "0123456789", decimal: ".", group: ","}`, c.EN},
			{"fa", `{digits: "۰۱۲۳۴۵۶۷۸۹", decimal: "٫", group: "٬"}`, c.FA},
		} {
			if got := evalJS[string](t, buyer, fmt.Sprintf(`shareaiMoney(%q, %d, %s)`, c.Decimal, c.Sig, loc.js)); got != loc.want {
				t.Errorf("%s: %s shareaiMoney(%q, %d) = %q, want %q", c.Name, loc.lang, c.Decimal, c.Sig, got, loc.want)
			}
		}
	}
}

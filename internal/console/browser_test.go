package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/console"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// chromium finds the browser the console's tests drive: $SHAREAI_CHROMIUM, or Debian's
// chromium package.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SHAREAI_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium: install it (apt-get install -y chromium), as .ci/run does, to run the console's browser tests")
	return ""
}

// screenshots is where the tests save what the pages looked like: $SHAREAI_SCREENSHOTS, or a
// folder in the system's temporary directory (they are artefacts, not committed).
func screenshots(t *testing.T) string {
	dir := os.Getenv("SHAREAI_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "shareai-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Chromium; each call gives a new profile (a new person).
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// shoot saves the page at desktop and phone widths.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := screenshots(t)
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(size.w, size.h)); err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		// Nothing wider than the screen: a page that scrolls sideways on a phone is broken.
		wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		if err != nil || wide {
			t.Errorf("%s at %s width: wider than the screen (%v)", name, size.name, err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s.png", name, size.name)), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900))
}

func signUp(t *testing.T, ctx context.Context, base, email, account, role string) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/signup"),
		chromedp.WaitVisible("#email"),
		chromedp.SendKeys("#email", email),
		chromedp.SendKeys("#password", "correct horse battery"),
		chromedp.SendKeys("#account", account),
		chromedp.Click("#role-"+role),
		chromedp.Click("#submit"),
		chromedp.WaitVisible("#logout"),
	)
	if err != nil {
		t.Fatalf("sign up %s: %v", email, err)
	}
}

// A buyer signs up, creates a key, streams an answer in the playground, and sees the request
// and its cost; a provider signs up, creates a token, runs an agent with it, sees the node,
// and after a job its earnings; a buyer cannot open provider pages; Persian is right to left.
func TestBrowser_BuyerAndProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Sim = sim.Config{TokensPerSecond: 200} })
	base := env.URL

	// The buyer.
	buyer := browser(t)
	signUp(t, buyer, base, "ada@example.com", "ada-labs", "buyer")
	acct, err := env.Store.Account(context.Background(), "ada-labs")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Deposit(context.Background(), acct.ID, 10*money.USD, "browser-test", time.Now()); err != nil {
		t.Fatal(err)
	}
	do := func(ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(ctx context.Context, sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.TextContent(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(v)
	}

	do(buyer, "open the overview", chromedp.Navigate(base+"/buyer"), chromedp.WaitVisible("#credits"))
	if credits := text(buyer, "#credits"); !strings.Contains(credits, "10") {
		t.Fatalf("credits %q; want the $10 deposited", credits)
	}
	shoot(t, buyer, "buyer-overview")
	do(buyer, "create a key", chromedp.Navigate(base+"/buyer/keys"), chromedp.WaitVisible("#key-name"),
		chromedp.SendKeys("#key-name", "laptop"), chromedp.Click("#create-key"), chromedp.WaitVisible("#new-key"))
	newKey := text(buyer, "#new-key")
	if !strings.Contains(newKey, "sk-") {
		t.Fatalf("new key %q", newKey)
	}
	if i := strings.Index(newKey, "sk-"); i >= 0 {
		newKey = strings.Fields(newKey[i:])[0]
	}
	shoot(t, buyer, "buyer-keys")
	do(buyer, "stream in the playground", chromedp.Navigate(base+"/buyer/playground"), chromedp.WaitVisible("#prompt"),
		chromedp.SetValue("#model", "sim/llama-3.1-8b"), chromedp.SendKeys("#prompt", "Tell me about idle GPUs."),
		chromedp.Click("#send"),
		chromedp.Poll[chromedp.Void](`(() => { const c = document.querySelector("#answer-cost"); return !!c && c.textContent.trim() !== "" })()`))
	answer, cost := text(buyer, "#answer"), text(buyer, "#answer-cost")
	if len(answer) < 20 || !strings.Contains(cost, "$") {
		t.Fatalf("playground answer %q, cost %q", answer, cost)
	}
	// The cost the script writes is the one billed, by the rule the pages write money with.
	var billed []*store.Usage
	env.WaitFor("the playground's usage", func() bool {
		billed, err = env.Store.Usages(context.Background(), acct.ID, 1)
		return err == nil && len(billed) == 1
	})
	if want := console.USD(billed[0].Cost); !strings.Contains(cost, ": "+want+" ·") {
		t.Errorf("playground cost %q; want the billed %s, written as the pages write it", cost, want)
	}
	shoot(t, buyer, "buyer-playground")
	do(buyer, "open the request log", chromedp.Navigate(base+"/buyer/requests"), chromedp.WaitVisible("#requests"))
	rows, err := chromedp.Run(buyer, chromedp.Evaluate[int](`document.querySelectorAll("#requests tr[data-request-id]").length`))
	if err != nil || rows < 1 {
		t.Fatalf("request log rows %d, %v; want the playground's request", rows, err)
	}
	shoot(t, buyer, "buyer-requests")
	do(buyer, "open the marketplace", chromedp.Navigate(base+"/models"), chromedp.WaitVisible("#models"))
	tiers, err := chromedp.Run(buyer, chromedp.Evaluate[int](`document.querySelectorAll("#tier-prices tr[data-model] td[data-tier]").length`))
	if err != nil || tiers < 3 {
		t.Fatalf("marketplace tier prices %d, %v; want a model's prices at its three service tiers", tiers, err)
	}
	shoot(t, buyer, "models")

	// A buyer cannot open a provider's pages.
	if status := get(t, buyer, base+"/provider"); status != 403 {
		t.Errorf("a buyer opened /provider: status %d, want 403", status)
	}

	// Persian, right to left.
	do(buyer, "switch to Persian", chromedp.Navigate(base+"/buyer"), chromedp.WaitVisible("#lang"),
		chromedp.SetValue("#lang", "fa"), chromedp.Click("#lang-submit"),
		chromedp.Sleep(300*time.Millisecond), // the form's navigation; the cookie then holds the choice
		chromedp.Navigate(base+"/buyer"), chromedp.WaitVisible("#credits"))
	dir, err := chromedp.Run(buyer, chromedp.Evaluate[string](`document.documentElement.dir`))
	if err != nil || dir != "rtl" {
		t.Errorf("Persian page dir %q, %v; want rtl", dir, err)
	}
	shoot(t, buyer, "buyer-overview-fa")

	// The provider.
	prov := browser(t)
	signUp(t, prov, base, "grace@example.com", "grace-gpus", "provider")
	do(prov, "create a token", chromedp.Navigate(base+"/provider"), chromedp.WaitVisible("#token-name"),
		chromedp.SendKeys("#token-name", "rig"), chromedp.Click("#create-token"), chromedp.WaitVisible("#new-token"))
	token := text(prov, "#new-token")
	if i := strings.Index(token, "spt-"); i >= 0 {
		token = strings.Fields(token[i:])[0]
	}
	if !strings.HasPrefix(token, "spt-") {
		t.Fatalf("new token %q", token)
	}
	a, err := agent.New(agent.Config{Coordinator: base, Token: token, DataDir: t.TempDir(), Name: "grace-rig",
		Engine: sim.New(sim.Config{}), InputPrice: 50_000_000, OutputPrice: 100_000_000})
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(context.Background())
	defer stop()
	go a.Run(actx)
	<-a.Ready()
	do(prov, "see the node", chromedp.Navigate(base+"/provider"),
		chromedp.WaitVisible(fmt.Sprintf(`#nodes tr[data-node-id=%q]`, a.NodeID())))
	// A job on the provider's node, then its earnings show.
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(newKey), option.WithMaxRetries(0))
	_, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "sim/llama-3.1-8b",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("earn something")},
	}, option.WithJSONSet("provider", map[string]any{"only": []string{a.NodeID()}}))
	if err != nil {
		t.Fatal(err)
	}
	env.WaitFor("the job to be settled", func() bool {
		b, err := env.Store.Balance(context.Background(), mustAccountID(t, env, "grace-gpus"))
		return err == nil && b.Pending > 0
	})
	do(prov, "see the earnings", chromedp.Navigate(base+"/provider"), chromedp.WaitVisible("#earnings-pending"))
	if pending := text(prov, "#earnings-pending"); !strings.Contains(pending, "$") || strings.Trim(pending, "$0.,٫۰ \n") == "" {
		t.Errorf("pending earnings %q; want some after a job", pending)
	}
	shoot(t, prov, "provider-nodes")
	do(prov, "open the node, with its score explained", chromedp.Navigate(base+"/provider/nodes/"+a.NodeID()),
		chromedp.WaitVisible("#node-status"), chromedp.WaitVisible("#score-reasons"))
	shoot(t, prov, "provider-node")
}

func mustAccountID(t *testing.T, env *testenv.Env, name string) string {
	t.Helper()
	a, err := env.Store.Account(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// get returns the status of a GET made by the page (with its cookies).
func get(t *testing.T, ctx context.Context, url string) int {
	t.Helper()
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q).then(r => r.status)`, url), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// A buyer whose batch runs sees it in the list with its progress bar, clicks through to its
// page, finds its files to download and cancels it; the pages fit a phone, in both languages.
func TestBrowser_BuyerBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser")
	}
	clk := &testenv.Clock{}
	clk.Set(time.Now())
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) { c.Coordinator.Batch.Now = clk.Now })
	ctx := context.Background()
	buyer := browser(t)
	signUp(t, buyer, env.URL, "ada@example.com", "ada-labs", "buyer")
	account := mustAccountID(t, env, "ada-labs")
	if err := env.Store.Deposit(ctx, account, 10*money.USD, "browser-test", time.Now()); err != nil {
		t.Fatal(err)
	}
	secret, _, err := ops.CreateKey(ctx, env.Store, ops.NewKey{AccountID: account, Kind: store.KeyBuyer, Name: "laptop", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	client := openai.NewClient(option.WithBaseURL(env.BaseURL()+"/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	// Three lines answered; one of a model no node serves waits, with the runner's clock held
	// within a minute of its start, until the batch is cancelled.
	_, b := batchOf(t, client, batchInput(batchModel, batchModel, batchModel, batchNoModel), map[string]string{"run": "browser"})
	clk.Freeze(clk.Now())
	env.WaitFor("three lines answered", func() bool { return batchNow(t, env, b.ID).Counts.Completed == 3 })

	row := fmt.Sprintf(`#batches tr[data-batch-id=%q]`, b.ID)
	open(t, buyer, env.URL+"/buyer/batches", row)
	if got := evalJS[map[string]float64](t, buyer, `(() => { const p = document.querySelector(`+fmt.Sprintf("%q", row+" progress")+`); return {value: p.value, max: p.max, width: p.getBoundingClientRect().width} })()`); got["value"] != 3 || got["max"] != 4 || got["width"] < 40 {
		t.Errorf("the batch's progress bar %v; want 3 of 4, drawn", got)
	}
	if status := evalJS[string](t, buyer, `document.querySelector(`+fmt.Sprintf("%q", row+" .batch-status")+`).textContent`); status != "In progress" {
		t.Errorf("the batch's status %q; want In progress", status)
	}
	shoot(t, buyer, "buyer-batches")

	if err := chromedp.Do(buyer, chromedp.Click(row+" td a"), chromedp.WaitVisible("#batch-status")); err != nil {
		t.Fatalf("click through to the batch: %v", err)
	}
	if path := evalJS[string](t, buyer, `location.pathname`); path != "/buyer/batches/"+b.ID {
		t.Fatalf("the row's link opened %s; want the batch's page", path)
	}
	href := evalJS[string](t, buyer, `document.querySelector("#download-input").getAttribute("href")`)
	if href != "/buyer/files/"+b.InputFileID+"/content" {
		t.Errorf("the input's download link %q; want the input file's content", href)
	}
	if status := get(t, buyer, env.URL+href); status != 200 {
		t.Errorf("the input's download: %d, want 200", status)
	}
	shoot(t, buyer, "buyer-batch")

	// Cancel: back on the page, told so, and the runner ends it with the answers of what ran.
	if err := chromedp.Do(buyer, chromedp.Click("#cancel-batch"), chromedp.WaitVisible(".flash")); err != nil {
		t.Fatalf("cancel the batch: %v", err)
	}
	if flash := evalJS[string](t, buyer, `document.querySelector(".flash").textContent`); !strings.Contains(flash, "being cancelled") {
		t.Errorf("flash %q after the cancel; want it saying the batch is being cancelled", flash)
	}
	env.WaitFor("the batch to be cancelled", func() bool { return batchNow(t, env, b.ID).Status == store.BatchCancelled })
	open(t, buyer, env.URL+"/buyer/batches/"+b.ID, "#download-output")
	if n := evalJS[int](t, buyer, `document.querySelectorAll("#cancel-batch").length`); n != 0 {
		t.Errorf("a cancelled batch's page has %d cancel buttons; want none", n)
	}

	// In Persian: right to left, its status translated.
	if err := chromedp.Do(buyer, chromedp.SetValue("#lang", "fa"), chromedp.Click("#lang-submit"), chromedp.WaitVisible(`html[lang="fa"]`)); err != nil {
		t.Fatal(err)
	}
	open(t, buyer, env.URL+"/buyer/batches", row)
	if status := evalJS[string](t, buyer, `document.querySelector(`+fmt.Sprintf("%q", row+" .batch-status")+`).textContent`); status != "لغو شد" {
		t.Errorf("the batch's status in Persian %q; want لغو شد", status)
	}
	shoot(t, buyer, "buyer-batches-fa")
	open(t, buyer, env.URL+"/buyer/batches/"+b.ID, "#batch-status")
	shoot(t, buyer, "buyer-batch-fa")
}

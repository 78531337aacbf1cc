package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

const qwen = "sim/qwen-2.5-7b"

// splitOpt sends a split with an SDK request, as a buyer adds ShareAI's extension.
func splitOpt(split map[string]any) option.RequestOption { return option.WithJSONSet("split", split) }

// served sends a chat with the SDK and returns the model its body and its header name.
func served(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams, opts ...option.RequestOption) (body, header, requestID string) {
	t.Helper()
	var resp *http.Response
	got, err := client.Chat.Completions.New(context.Background(), params, append(opts, option.WithResponseInto(&resp))...)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	return got.Model, resp.Header.Get(gateway.HeaderModel), resp.Header.Get(gateway.HeaderRequestID)
}

// A 90/10 split over 1,000 requests sends 10% of them to the second arm, within ±3% (the
// rotation makes it exact); every answer names the model that served it, in its body and its
// header, and its record keeps the split. Ratings by the account show in the comparison, as
// do the arms' figures; another account cannot rate the account's generations.
func TestRoulette_SplitOverManyRequests(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2))
	client := env.Client()
	const n = 1000
	var (
		mu    sync.Mutex
		count = map[string]int{}
		ids   = map[string][]string{} // request ids by model
		wg    sync.WaitGroup
		work  = make(chan int)
	)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				p := chatParams(fmt.Sprintf("request %d", i), int64(i))
				p.MaxTokens = openai.Int(4)
				body, header, id := served(t, client, p, splitOpt(map[string]any{qwen: 0.1}))
				if body != header {
					t.Errorf("request %d: body names %q, %s %q; want the same model", i, body, gateway.HeaderModel, header)
				}
				mu.Lock()
				count[body]++
				ids[body] = append(ids[body], id)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if count[model]+count[qwen] != n || count[qwen] < 70 || count[qwen] > 130 {
		t.Fatalf("served %v; want %d of %d by %s (10%% ± 3%%), the rest by %s", count, n/10, n, qwen, model)
	}
	t.Logf("served %v", count)

	const split = "sim/llama-3.1-8b=0.9,sim/qwen-2.5-7b=0.1"
	rec := billed(t, env, ids[qwen][0])
	if rec.Split != split || rec.Model != qwen {
		t.Errorf("record of a request qwen served: split %q model %q; want %q and %s", rec.Split, rec.Model, split, qwen)
	}
	// Every request billed, before the comparison counts them.
	for _, m := range []string{model, qwen} {
		billed(t, env, ids[m][len(ids[m])-1])
	}
	env.WaitFor("every request billed", func() bool {
		us, _ := env.Store.Usages(context.Background(), keyAccount(t, env), n+1)
		return len(us) == n
	})

	// Ratings: two of qwen's, the second rated twice (the later counts), one of llama's.
	rate := func(c openai.Client, id string, score float64) error {
		var raw json.RawMessage
		return c.Post(context.Background(), "feedback", map[string]any{"id": id, "score": score, "comment": "ok"}, &raw)
	}
	chatID := func(requestID string) string { return "chatcmpl-" + strings.TrimPrefix(requestID, "req_") }
	for _, r := range []struct {
		id    string
		score float64
	}{{chatID(ids[qwen][0]), 0.2}, {chatID(ids[qwen][1]), 1}, {ids[qwen][1], 0.6}, {chatID(ids[model][0]), 0.9}} {
		if err := rate(client, r.id, r.score); err != nil {
			t.Fatalf("rate %s: %v", r.id, err)
		}
	}
	mallory := otherBuyer(t, env)
	assertAPIError(t, rate(mallory, chatID(ids[qwen][2]), 0), http.StatusNotFound, "not_found")
	assertAPIError(t, rate(client, "chatcmpl-nosuchgeneration", 0.5), http.StatusNotFound, "not_found")
	bad := rate(client, chatID(ids[qwen][2]), 1.5)
	if e := assertAPIError(t, bad, http.StatusBadRequest, "invalid_value"); e.Param != "score" {
		t.Errorf("a score of 1.5: param %q; want score", e.Param)
	}

	var cmp struct {
		Data gateway.SplitComparison `json:"data"`
	}
	mustGet(t, client, "splits?days=7", &cmp)
	if len(cmp.Data.Splits) != 1 || cmp.Data.Splits[0].Split != split || cmp.Data.Splits[0].Requests != n {
		t.Fatalf("splits %+v; want %s's %d requests", cmp.Data.Splits, split, n)
	}
	arms := map[string]gateway.ArmReport{}
	for _, a := range cmp.Data.Splits[0].Arms {
		arms[a.Model] = a
	}
	q, l := arms[qwen], arms[model]
	if q.Requests != count[qwen] || l.Requests != count[model] || q.Weight != "0.1" || l.Weight != "0.9" {
		t.Errorf("arms %+v; want %v at weights 0.9 and 0.1", cmp.Data.Splits[0].Arms, count)
	}
	if q.FeedbackCount != 2 || q.MeanScore == nil || *q.MeanScore != 0.4 || l.FeedbackCount != 1 || *l.MeanScore != 0.9 {
		t.Errorf("qwen's feedback %d mean %v, llama's %d; want 2 at 0.4 (0.2 and 0.6, the later of two), and 1", q.FeedbackCount, q.MeanScore, l.FeedbackCount)
	}
	if q.LatencyMS == nil || q.LatencyMS.Sample != count[qwen] || q.TTFTMS != nil || q.ErrorRate != 0 || q.CostPer1K == nil || q.PromptTokens == 0 {
		t.Errorf("qwen's figures %+v; want latencies of every answer, no ttft (none streamed), no errors, a cost per 1k tokens", q)
	}
	var none struct {
		Data gateway.SplitComparison `json:"data"`
	}
	mustGet(t, mallory, "splits", &none)
	if len(none.Data.Splits) != 0 {
		t.Errorf("another account sees splits %+v", none.Data.Splits)
	}
}

// otherBuyer is a client of a second account, with credits.
func otherBuyer(t *testing.T, env *testenv.Env) openai.Client {
	t.Helper()
	ctx := context.Background()
	m := &store.Account{ID: store.NewID("acct"), Name: "mallory", CreatedAt: time.Now()}
	if err := env.Store.CreateAccount(ctx, m); err != nil {
		t.Fatal(err)
	}
	secret, mk := store.NewKey(m.ID, store.KeyBuyer, "mallory's key", time.Now())
	if err := env.Store.CreateKey(ctx, mk); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Deposit(ctx, m.ID, 5*money.USD, "mallory-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return env.Client(option.WithAPIKey(secret))
}

// newKey stores a key of the network's buyer with rules, and returns a client of it.
func newKey(t *testing.T, env *testenv.Env, rules func(k *store.Key)) openai.Client {
	t.Helper()
	secret, k := store.NewKey(keyAccount(t, env), store.KeyBuyer, "roulette", time.Now())
	rules(k)
	if err := env.Store.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return env.Client(option.WithAPIKey(secret))
}

// A key's default split applies to its requests that set none; a request's own split wins.
func TestRoulette_KeyDefault(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	client := newKey(t, env, func(k *store.Key) { k.Split = []byte(`{"sim/qwen-2.5-7b":1}`) })
	for i := range 4 {
		if body, header, id := served(t, client, chatParams("hi", int64(i))); body != qwen || header != qwen {
			t.Fatalf("the key's split: served by %q (%s %q); want %s", body, gateway.HeaderModel, header, qwen)
		} else if rec := billed(t, env, id); rec.Split != "sim/qwen-2.5-7b=1" {
			t.Errorf("record's split %q", rec.Split)
		}
	}
	p := chatParamsFor(qwen, "hi", 1)
	for range 4 {
		if body, _, id := served(t, client, p, splitOpt(map[string]any{model: 1})); body != model {
			t.Fatalf("the request's split: served by %q; want %s, its own split's arm", body, model)
		} else if rec := billed(t, env, id); rec.Split != "sim/llama-3.1-8b=1" {
			t.Errorf("record's split %q; want the request's", rec.Split)
		}
	}
}

// A streamed answer names the arm that serves it too: its header, and every chunk's model.
func TestRoulette_StreamNamesTheArm(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	resp := env.Post("/chat/completions", `{"model":"`+model+`","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}],"split":{"`+qwen+`":1}}`)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(gateway.HeaderModel) != qwen {
		t.Fatalf("stream: %d, %s %q; want 200 naming %s", resp.StatusCode, gateway.HeaderModel, resp.Header.Get(gateway.HeaderModel), qwen)
	}
	chunks := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct{ Model string }
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Model != qwen {
			t.Fatalf("chunk %s: model %q; want %s", data, c.Model, qwen)
		}
		chunks++
	}
	if chunks == 0 {
		t.Fatalf("no chunks in %s", b)
	}
}

// Every arm must be a model the key may use: another is a 403 naming the arm, before anything
// is held or recorded.
func TestRoulette_ArmOutsideKeyModels(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	ctx := context.Background()
	client := newKey(t, env, func(k *store.Key) { k.Models = []string{model} })
	before, err := env.Store.Balance(ctx, keyAccount(t, env))
	if err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	_, err = client.Chat.Completions.New(ctx, chatParams("hi", 1), splitOpt(map[string]any{qwen: 0.5}), option.WithResponseInto(&resp))
	e := assertAPIError(t, err, http.StatusForbidden, "model_not_allowed")
	if e.Param != "split."+qwen || !strings.Contains(e.Message, "not '"+qwen+"'") {
		t.Errorf("403 param %q message %q; want it to name the arm", e.Param, e.Message)
	}
	after, err := env.Store.Balance(ctx, keyAccount(t, env))
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Errorf("balance %+v after the 403, %+v before; want nothing held or spent", after, before)
	}
	id := e.Response.Header.Get(gateway.HeaderRequestID)
	if _, err := env.Store.UsageByRequest(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused request %s has a record (%v); want none: it never reached a hold", id, err)
	}
	if body, _, _ := served(t, client, chatParams("hi", 2), splitOpt(map[string]any{model: 0.5})); body != model {
		t.Errorf("a split within the key's models: served by %q", body)
	}
}

// The key's regions rule applies to every arm: an arm whose only node is outside the region
// is not served there, and the default arm serves its requests; a drawn arm no node serves
// is served by the default too.
func TestRoulette_RegionsRuleAppliesToArms(t *testing.T) {
	env := testenv.New(t, testenv.Providers(2), func(c *testenv.Config) {
		c.Regions = []string{"de", "us"}
		c.NewEngine = func(i int) (engine.Engine, error) { // de serves llama, us qwen
			return sim.New(sim.Config{Models: sim.DefaultModels[i : i+1]}), nil
		}
	})
	de, us := env.Agents[0].NodeID(), env.Agents[1].NodeID()
	split := splitOpt(map[string]any{qwen: 0.5})
	send := func(client openai.Client, opts ...option.RequestOption) (model, node string) {
		var resp *http.Response
		got, err := client.Chat.Completions.New(context.Background(), chatParams("hi", 1), append(opts, option.WithResponseInto(&resp))...)
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
		return got.Model, resp.Header.Get(gateway.HeaderNode)
	}
	// Without the rule, both arms serve, each on its node.
	nodes := map[string]string{}
	for range 4 {
		m, node := send(env.Client(), split)
		nodes[m] = node
	}
	if nodes[model] != de || nodes[qwen] != us {
		t.Fatalf("without a region: %v; want llama on %s and qwen on %s", nodes, de, us)
	}
	eu := newKey(t, env, func(k *store.Key) { k.Routing = []byte(`{"regions":["de"]}`) })
	for i := range 6 {
		if m, node := send(eu, split); m != model || node != de {
			t.Fatalf("request %d with the key's region de: served by %s on %s; want llama on %s, qwen's node being outside", i, m, node, de)
		}
	}
	for range 4 {
		if m, _ := send(env.Client(), splitOpt(map[string]any{"no/such-model": 0.5})); m != model {
			t.Fatalf("an arm no node serves: served by %s; want the default %s", m, model)
		}
	}
}

// A session keeps its arm, request after request; sessions spread over the arms.
func TestRoulette_SessionSticks(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	client := env.Client()
	split := splitOpt(map[string]any{qwen: 0.5})
	arms := map[string]int{}
	for s := range 12 {
		session := option.WithHeader(gateway.HeaderSession, fmt.Sprintf("chat-%d", s))
		first, _, _ := served(t, client, chatParams("hi", 1), split, session)
		for i := range 4 {
			if m, _, _ := served(t, client, chatParams("more", int64(i)), split, session); m != first {
				t.Fatalf("session chat-%d moved from %s to %s", s, first, m)
			}
		}
		arms[first]++
	}
	p := chatParams("hi", 1)
	p.User = openai.String("alice")
	first, _, _ := served(t, client, p, split)
	for range 4 {
		if m, _, _ := served(t, client, p, split); m != first {
			t.Fatalf("user alice moved from %s to %s", first, m)
		}
	}
	if arms[model] == 0 || arms[qwen] == 0 {
		t.Errorf("12 sessions over a 50/50 split all took one arm: %v", arms)
	}
}

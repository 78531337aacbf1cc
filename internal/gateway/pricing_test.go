package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// A provider asking $0.40 / $0.80 per 1M tokens at peak (weekdays 09:00-18:00 UTC), $0.05 /
// $0.10 outside, on a coordinator whose clock is moved across the edge.
var (
	peakSchedule = &protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{
		{Name: "peak", When: "mon-fri 09:00-18:00", InputPrice: 400_000_000, OutputPrice: 800_000_000}}}
	monday9 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
)

// The provider's earnings report splits what it earned by the ask it was billed at, the
// same total as its earnings per day; /endpoints shows the ask in effect, its window and
// until when.
func TestProviderEarnings_ByAsk(t *testing.T) {
	clk := &testenv.Clock{}
	env := testenv.New(t, testenv.Providers(1), testenv.WithClock(clk, monday9.Add(-time.Hour)),
		func(c *testenv.Config) { c.Agent.AskSchedule = peakSchedule })
	ctx := context.Background()
	client := env.Client()
	provider := env.Client(option.WithAPIKey(env.ProviderToken))

	earn := func(prompt string, in, out money.Price) money.Nanos {
		t.Helper()
		var resp *http.Response
		got, err := client.Chat.Completions.New(ctx, chatParams(prompt, 1), option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		rec := billed(t, env, resp.Header.Get(gateway.HeaderRequestID))
		net := in.Cost(int(got.Usage.PromptTokens)) + out.Cost(int(got.Usage.CompletionTokens))
		if rec.Cost != net+money.Fee(net, 500) {
			t.Fatalf("%q cost %s; want %s plus the fee", prompt, rec.Cost, net)
		}
		return net
	}
	endpoint := func() api.Endpoint {
		var list api.EndpointList
		mustGet(t, client, "models/"+model+"/endpoints", &list)
		return list.Data.Endpoints[0]
	}
	if e := endpoint(); e.Prompt != 50_000_000 || e.AskWindow != "" || e.PriceUntil != monday9.Unix() || e.Surge != nil {
		t.Errorf("endpoint off-peak: %+v; want the flat ask until 09:00, no surge", e)
	}
	flat := earn("Off-peak.", 50_000_000, 100_000_000) + earn("Off-peak again.", 50_000_000, 100_000_000)
	clk.Jump(time.Hour)
	if e := endpoint(); e.Prompt != 400_000_000 || e.ServiceTiers["priority"].Prompt <= e.Prompt || e.AskWindow != "peak" || e.PriceUntil != monday9.Add(9*time.Hour).Unix() {
		t.Errorf("endpoint at peak: %+v; want the peak ask, priced up at the priority tier, until 18:00", e)
	}
	peak := earn("At peak.", 400_000_000, 800_000_000)

	var e struct {
		Data struct {
			Earnings []struct {
				Pending api.USD `json:"pending"`
			} `json:"earnings"`
			ByAsk []gateway.AskEarning `json:"by_ask"`
		} `json:"data"`
	}
	mustGet(t, provider, "provider/earnings", &e)
	want := []gateway.AskEarning{{Window: "peak", Surge: 1, Parts: 1, Earned: api.USD(peak)}, {Window: "", Surge: 1, Parts: 2, Earned: api.USD(flat)}}
	if len(e.Data.ByAsk) != 2 || e.Data.ByAsk[0] != want[0] || e.Data.ByAsk[1] != want[1] {
		t.Errorf("by ask %+v; want %+v", e.Data.ByAsk, want)
	}
	var days api.USD
	for _, d := range e.Data.Earnings {
		days += d.Pending
	}
	if days != api.USD(flat+peak) {
		t.Errorf("earnings per day sum to %s; by ask to %s", money.Nanos(days), flat+peak)
	}
}

package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/agent"
	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/schedule"
	"github.com/shareai/shareai/internal/testenv"
)

type nodesBody struct {
	Data []gateway.NodeInfo `json:"data"`
}

type nodeBody struct {
	Data gateway.NodeReport `json:"data"`
}

// A provider sees its nodes through the API: online, hardware, the latest reading, windows and
// offers; and per node its jobs, tokens, earnings, online and busy time, fill rate and uptime
// inside its windows.
func TestProviderNodes(t *testing.T) {
	temp, util := 61.0, 40.0
	reading := &protocol.Telemetry{GPUs: []protocol.GPUStat{{Index: 0, TemperatureC: &temp, UtilizationPct: &util}}}
	always, err := schedule.Parse("daily 00:00-24:00", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.Coordinator.Fleet.HeartbeatInterval = 100 * time.Millisecond
		c.EachAgent = func(i int, c *agent.Config) {
			c.Schedule, c.Windows, c.Timezone = always, always.String(), "UTC"
			c.Telemetry = func(context.Context) (*protocol.Telemetry, error) { return reading, nil }
			c.CheckEvery = 20 * time.Millisecond
			c.Hardware.Fingerprint = "fp-1"
		}
	})
	client := env.Client()
	ctx := context.Background()
	for i := range 3 {
		if _, err := client.Chat.Completions.New(ctx, chatParams("Work for the node.", int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	provider := env.Client(option.WithAPIKey(env.ProviderToken))
	id := env.Agents[0].NodeID()

	var nodes nodesBody
	env.WaitFor("the node's reading to reach the coordinator", func() bool {
		mustGet(t, provider, "provider/nodes", &nodes)
		return len(nodes.Data) == 1 && nodes.Data[0].Telemetry != nil
	})
	n := nodes.Data[0]
	if n.ID != id || !n.Online || n.Paused != nil || n.Fingerprint != "fp-1" || n.Windows != "daily 00:00-24:00" || n.Timezone != "UTC" {
		t.Errorf("node = %+v; want the agent's node, online, taking jobs, with its fingerprint and windows", n)
	}
	if len(n.Offers) != 2 || n.Offers[0].Model != model || n.Offers[0].InputPrice.String() != "0.05" {
		t.Errorf("offers = %+v; want the sim models at $0.05 per 1M input tokens", n.Offers)
	}
	if g := n.Telemetry.GPUs; len(g) != 1 || *g[0].TemperatureC != 61 {
		t.Errorf("telemetry = %+v; want the node's 61 °C reading", n.Telemetry)
	}

	var rep nodeBody
	// The node's jobs are counted apart from its earnings, which come with the requests'
	// settlements (group-committed, after their receipts): wait for both.
	env.WaitFor("the node's jobs, earnings and telemetry to be recorded", func() bool {
		mustGet(t, provider, "provider/nodes/"+id+"?days=2", &rep)
		days := rep.Data.Days
		return rep.Data.Totals.Jobs == 3 && len(rep.Data.History) > 0 && len(days) > 0 && days[len(days)-1].EarnedPending.String() != "0"
	})
	d := rep.Data
	if d.Telemetry == nil {
		t.Error("the node's report lacks its latest reading")
	}
	if r := d.Reputation; r == nil || r.Level != "verified" || r.Score <= 0 || len(r.Reasons) == 0 || r.Reasons[0].Text == "" {
		t.Errorf("reputation = %+v; want the node's level, score and the reasons for it", r)
	}
	if len(d.Days) != 2 || d.Days[1].Date != time.Now().UTC().Format(time.DateOnly) {
		t.Fatalf("days = %+v; want yesterday and today", d.Days)
	}
	today := d.Days[1]
	if today.Jobs != 3 || today.Failed != 0 || today.CompletionTokens == 0 || today.EarnedPending.String() == "0" {
		t.Errorf("today = %+v; want 3 jobs with their tokens and pending earnings", today)
	}
	if today.OnlineSeconds < 0 || today.BusySeconds > today.OnlineSeconds+1 || today.FillRate < 0 || today.FillRate > 1 {
		t.Errorf("today's times = %+v; want busy within online and a fill rate in [0, 1]", today)
	}
	if today.WindowSeconds == 0 || today.UptimeInWindows < 0 || today.UptimeInWindows > 1 {
		t.Errorf("today's windows = %+v; want time inside the windows and an uptime share in [0, 1]", today)
	}
	if len(d.Sessions) != 1 || d.Sessions[0].EndedAt != "" {
		t.Errorf("sessions = %+v; want the one open session", d.Sessions)
	}
	if h := d.History[0]; h.Telemetry == nil || len(h.GPUs) != 1 || *h.GPUs[0].UtilizationPct != 40 {
		t.Errorf("history = %+v; want minutes of the node's readings", d.History)
	}

	// Another provider's node, or one that does not exist, is not found; buyers' keys are refused.
	if _, err := get(t, provider, "provider/nodes/node_nope", &rep); !isStatus(err, http.StatusNotFound) {
		t.Errorf("unknown node: %v; want 404", err)
	}
	if _, err := get(t, client, "provider/nodes", &nodes); err == nil {
		t.Error("a buyer's key listed provider nodes")
	}
}

func isStatus(err error, status int) bool {
	apiErr, ok := err.(*openai.Error)
	return ok && apiErr.StatusCode == status
}

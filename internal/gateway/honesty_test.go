package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/engine/sim"
	"github.com/shareai/shareai/internal/meter"
	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// inflating is an engine that claims ten times the tokens it generates.
type inflating struct{ *sim.Engine }

func (e inflating) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	res, err := e.Engine.Run(ctx, req, out)
	res.Usage.PromptTokens *= 1000
	res.Usage.CompletionTokens *= 10
	return res, err
}

// A node that over-reports usage is billed at the coordinator's count of what it delivered,
// never more, and its over-claim is recorded against it.
func TestUsage_OverClaimIsNotBilled(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) {
			return inflating{sim.New(sim.Config{})}, nil
		}
	})
	client := env.Client()
	var resp *http.Response
	params := chatParams("How much is this?", 3)
	got, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	text := got.Choices[0].Message.Content
	honest := sim.New(sim.Config{}).Answer(&protocol.Request{Kind: protocol.KindChat, Model: model, Messages: mustJSON(t, params), Seed: &[]int64{3}[0]})
	if text != honest {
		t.Fatalf("answer %q, want the sim's %q", text, honest)
	}
	// Billed the coordinator's count of the text in the model family's tokenizer (and one
	// end-of-text token), not the claim, and no less than the sim's own honest count.
	want := meter.Count(meter.FamilyOf(model), text) + 1
	if c := int(got.Usage.CompletionTokens); c != want || c < meter.Words(text) {
		t.Errorf("billed %d completion tokens for %q; want the coordinator's count %d", c, text, want)
	}
	node := resp.Header.Get("X-Shareai-Node")
	env.WaitFor("the over-claim to be recorded", func() bool {
		n, err := env.Store.Node(context.Background(), node)
		return err == nil && n.Overclaims == 1
	})
	// Its provider sees it on the node's record.
	var rec nodeBody
	mustGet(t, env.Client(option.WithAPIKey(env.ProviderToken)), "provider/nodes/"+node, &rec)
	if r := rec.Data.Reputation; r == nil || r.Overclaims != 1 || len(rec.Data.Offers) == 0 || rec.Data.Offers[0].Level != "verified" {
		t.Errorf("node's record: reputation %+v, offers %+v; want 1 over-claim shown, the model verified", r, rec.Data.Offers)
	}
	ledgerSumIsZero(t, env)
}

// promptInflating claims three times the prompt tokens it read: within the prompt's size in
// bytes, so only a count of the prompt catches it.
type promptInflating struct{ *sim.Engine }

func (e promptInflating) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	res, err := e.Engine.Run(ctx, req, out)
	res.Usage.PromptTokens *= 3
	return res, err
}

// A node that inflates its prompt claim is billed at most the coordinator's count of the
// prompt (with a chat template's slack), and flagged.
func TestUsage_PromptOverClaimIsNotBilled(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) {
			return promptInflating{sim.New(sim.Config{})}, nil
		}
	})
	prompt := strings.Repeat("Summarise the history of the river valley and its towns. ", 40)
	params := chatParams(prompt, 3)
	var resp *http.Response
	client := env.Client()
	got, err := client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	billed := got.Usage.PromptTokens
	bound := int64(meter.Count(meter.FamilyOf(model), string(mustJSON(t, params))) + 64)
	if billed > bound {
		t.Errorf("billed %d prompt tokens; want at most the coordinator's count %d", billed, bound)
	}
	node := resp.Header.Get("X-Shareai-Node")
	env.WaitFor("the over-claim to be recorded", func() bool {
		n, err := env.Store.Node(context.Background(), node)
		return err == nil && n.Overclaims == 1
	})
	ledgerSumIsZero(t, env)
}

// claimsPrompt claims a fixed number of prompt tokens.
type claimsPrompt struct {
	*sim.Engine
	n int
}

func (e claimsPrompt) Run(ctx context.Context, req *protocol.Request, out engine.Output) (engine.Result, error) {
	res, err := e.Engine.Run(ctx, req, out)
	res.Usage.PromptTokens = e.n
	return res, err
}

// A prompt sent with its text escaped (as Python's json.dumps sends non-ASCII: "\u4e2d") is
// counted as the text the model reads, not as its escapes, which hold several times the
// tokens: a claim of the escapes' tokens is cut down and flagged.
func TestUsage_EscapedPromptCountedAsText(t *testing.T) {
	text := strings.Repeat("中文的提示，模型读到的是字符。", 30)
	var escaped strings.Builder
	for _, r := range text {
		fmt.Fprintf(&escaped, `\u%04x`, r)
	}
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"` + escaped.String() + `"}]}`
	claim := meter.Count(meter.FamilyOf(model), escaped.String())
	env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
		c.NewEngine = func(int) (engine.Engine, error) {
			return claimsPrompt{sim.New(sim.Config{}), claim}, nil
		}
	})
	resp := env.Post("/chat/completions", body)
	var got struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	honest := meter.Count(meter.FamilyOf(model), text)
	if resp.StatusCode != 200 || got.Usage.PromptTokens > honest+80 {
		t.Errorf("status %d, billed %d prompt tokens of a claim of %d; want at most the text's %d and a template's slack", resp.StatusCode, got.Usage.PromptTokens, claim, honest)
	}
	node := resp.Header.Get("X-Shareai-Node")
	env.WaitFor("the over-claim to be recorded", func() bool {
		n, err := env.Store.Node(context.Background(), node)
		return err == nil && n.Overclaims == 1
	})
}

// An honest node is billed as it claims, and never flagged, for prompts whose tokens their
// bytes understate: tools, which a template prints into the prompt, and an image.
func TestUsage_ToolsAndImagesBilledAsClaimed(t *testing.T) {
	tools := `[{"type":"function","function":{"name":"get_weather","description":"` + strings.Repeat("Returns the weather of a city. ", 20) +
		`","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	for _, tt := range []struct {
		name, body string
		claim      int
	}{
		{"tools", `{"model":"` + model + `","tools":` + tools + `,"messages":[{"role":"user","content":"Weather in Paris?"}]}`,
			2*meter.Count(meter.Llama3, tools) + 40},
		{"image", `{"model":"` + model + `","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`,
			1200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := testenv.New(t, testenv.Providers(1), func(c *testenv.Config) {
				c.NewEngine = func(int) (engine.Engine, error) {
					return claimsPrompt{sim.New(sim.Config{}), tt.claim}, nil
				}
			})
			resp := env.Post("/chat/completions", tt.body)
			var got struct {
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if resp.StatusCode != 200 || got.Usage.PromptTokens != tt.claim {
				t.Errorf("status %d, billed %d prompt tokens; want the honest claim %d", resp.StatusCode, got.Usage.PromptTokens, tt.claim)
			}
			env.WaitFor("the request billed", func() bool { return balance(t, env).Held == 0 })
			if n, err := env.Store.Node(context.Background(), resp.Header.Get("X-Shareai-Node")); err != nil || n.Overclaims != 0 {
				t.Errorf("node %+v, %v; want no over-claim", n, err)
			}
		})
	}
}

package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/testenv"
)

// A cap set after spending counts what was spent since its window's start: set at exactly
// that, it refuses the next request with the 402 spend-limit error, and /v1/key shows the
// spending.
func TestKey_CapAfterSpend(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	client := env.Client()
	ctx := context.Background()
	k, err := env.Store.KeyByHash(ctx, store.HashSecret(env.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	var spent money.Nanos
	for i := range 2 {
		var resp *http.Response
		if _, err := client.Chat.Completions.New(ctx, chatParams("Spend before any cap.", int64(i)), option.WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		spent += billed(t, env, resp.Header.Get("X-Request-Id")).Cost
	}
	if spent <= 0 {
		t.Fatalf("spent %d; want the requests billed", spent)
	}

	tests := []struct {
		name   string
		cap    store.Cap
		scope  string // as /v1/key names it
		saying string // in the refusal
	}{
		{"key daily", store.Cap{Scope: store.KeyScope(k.ID), Period: store.Daily}, "key", "daily API key spend limit"},
		{"key monthly", store.Cap{Scope: store.KeyScope(k.ID), Period: store.Monthly}, "key", "monthly API key spend limit"},
		{"account weekly", store.Cap{Scope: store.AccountScope(k.AccountID), Period: store.Weekly}, "account", "weekly account spend limit"},
		{"account monthly", store.Cap{Scope: store.AccountScope(k.AccountID), Period: store.Monthly}, "account", "monthly account spend limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cap.Limit = spent
			if err := env.Store.SetCap(ctx, tt.cap); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				tt.cap.Limit = 0
				if err := env.Store.SetCap(ctx, tt.cap); err != nil {
					t.Error(err)
				}
			})

			_, err := client.Chat.Completions.New(ctx, chatParams("One more.", 9))
			e := assertAPIError(t, err, http.StatusPaymentRequired, "spend_limit_exceeded")
			if !strings.Contains(e.Message, tt.saying) || !strings.Contains(e.Message, "$0 left") {
				t.Errorf("refusal %q; want the %s, with $0 left", e.Message, tt.saying)
			}

			var kb keyBody
			mustGet(t, client, "key", &kb)
			if len(kb.Data.Limits) != 1 {
				t.Fatalf("limits %+v; want the one cap", kb.Data.Limits)
			}
			l := kb.Data.Limits[0]
			if l.Scope != tt.scope || l.Period != tt.cap.Period || l.Limit.String() != spent.String() || l.Usage.String() != spent.String() ||
				l.Held != "0" || l.LimitRemaining != "0" {
				t.Errorf("limit %+v; want %s %s, limit and usage %s, nothing held or remaining", l, tt.scope, tt.cap.Period, spent)
			}
		})
	}
}

package console

import (
	"errors"
	"testing"

	"github.com/shareai/shareai/internal/store"
)

// A key made in the console may tighten the coordinator's rate limits, never lift them.
func TestParseKeyLimits(t *testing.T) {
	most := store.RateLimits{RequestsPerMinute: 60, Concurrent: 4} // and any tokens per minute
	tests := []struct {
		name    string
		form    keyForm
		want    store.RateLimits
		wantErr string // the catalogue key
	}{
		{"none: the coordinator's", keyForm{}, store.RateLimits{}, ""},
		{"lower", keyForm{RPM: "10", TPM: "5000000", Concurrent: " 4 "}, store.RateLimits{RequestsPerMinute: 10, TokensPerMinute: 5000000, Concurrent: 4}, ""},
		{"higher than the coordinator's", keyForm{RPM: "61"}, store.RateLimits{}, "buyer.keys.error.rate_max"},
		{"zero", keyForm{Concurrent: "0"}, store.RateLimits{}, "buyer.keys.error.rate"},
		{"negative: no lifting", keyForm{TPM: "-1"}, store.RateLimits{}, "buyer.keys.error.rate"},
		{"not a number", keyForm{RPM: "1e3"}, store.RateLimits{}, "buyer.keys.error.rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKeyLimits(tt.form, most)
			var fe *keyFormError
			switch {
			case tt.wantErr == "" && (err != nil || got != tt.want):
				t.Errorf("parseKeyLimits = %+v, %v; want %+v", got, err, tt.want)
			case tt.wantErr != "" && (!errors.As(err, &fe) || fe.Key != tt.wantErr):
				t.Errorf("parseKeyLimits error %v; want %s", err, tt.wantErr)
			}
		})
	}
}

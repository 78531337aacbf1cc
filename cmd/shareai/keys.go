package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shareai/shareai/internal/localnet"
	"github.com/shareai/shareai/internal/matcher"
	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/tier"
)

const keysAbout = `Manage buyers' API keys (sk-…) and providers' tokens (spt-…).

  shareai keys create [--account NAME] [--name LABEL] [--provider]
                      [--limit USD [--period daily|weekly|monthly]]
                      [--rpm N] [--tpm N] [--concurrent N]
                      [--service-tier priority|default|flex]
                      [--routing JSON] [--models LIST] [--split JSON]
  shareai keys list   [--account NAME] [--provider]
  shareai keys limits KEY-ID-OR-PREFIX [--rpm N] [--tpm N] [--concurrent N]
  shareai keys tier   KEY-ID-OR-PREFIX priority|default|flex
  shareai keys revoke KEY-ID-OR-PREFIX

'keys' works on the coordinator's database directly (SQLite in --data-dir, or --db URL for
PostgreSQL), so run it on the coordinator's machine with the same --data-dir or --db; the
coordinator need not be stopped.
A created key is printed once: only its hash is stored. A revoked key stops working within
seconds (the coordinator caches valid keys for 10s). --limit caps what a new API key can
spend per UTC day, week (from Monday) or month (--period, default monthly); change or
remove the cap later with 'shareai admin cap --key KEY-ID'.
--rpm, --tpm and --concurrent limit an API key's requests per minute, tokens per minute and
requests in flight at once, in each coordinator process (429 beyond them); 0 takes the
coordinator's --key-rpm, --key-tpm or --key-concurrent, -1 lifts it. 'keys limits' sets all
three of an existing key: a limit not given goes back to the coordinator's default.
--service-tier is the service tier of an API key's requests that name none in their
service_tier: priority (gold: first in every queue, may preempt flex), default (silver, the
default) or flex (bronze: cheapest, may be paused for priority and resumed exactly); each is
priced at its multiplier of the ask (the coordinator's --tier-prices). 'keys tier' changes it.
--split is an API key's default model roulette, for its requests that set no split: the JSON
of a request's split, '{"qwen-2.5-7b":0.2}' sending 20% of them to qwen-2.5-7b and the rest
to the model they name; its models must be among --models, when given.
The coordinator applies a change within seconds.`

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "list" && args[0] != "limits" && args[0] != "tier" && args[0] != "revoke") {
		w, err := stderr, errUsage
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			w, err = stdout, nil
		}
		fmt.Fprintln(w, keysAbout+"\n\nFlags: --data-dir DIR (default ./.shareai) or --db URL, --account NAME, --name LABEL, --provider,\n--limit USD --period daily|weekly|monthly, --routing JSON, --models LIST, --split JSON, --rpm N, --tpm N, --concurrent N,\n--service-tier TIER; see 'shareai keys create --help'.")
		return err
	}
	verb := args[0]
	fs := flag.NewFlagSet("keys "+verb, flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	account := fs.String("account", "default", "the account (created if it does not exist)")
	name := fs.String("name", "", "a label for the key")
	provider := fs.Bool("provider", false, "a provider token for registering agents, instead of a buyer's API key")
	limit := fs.String("limit", "", "create: cap what the new API key can spend per --period, in USD")
	routing := fs.String("routing", "", `create: the API key's default routing preferences, as a request's provider object, e.g. '{"regions":["eu"],"sort":"price"}'`)
	models := fs.String("models", "", "create: the only models the API key may use, comma-separated, in order of preference (also its fallbacks)")
	split := fs.String("split", "", `create: the API key's default model roulette, as a request's split object, e.g. '{"qwen-2.5-7b":0.2}'`)
	period := fs.String("period", store.Monthly, "create: the --limit's window: daily, weekly or monthly (UTC)")
	var limits store.RateLimits
	fs.IntVar(&limits.RequestsPerMinute, "rpm", 0, "create, limits: requests per minute the API key may make (0: the coordinator's --key-rpm; -1: unlimited)")
	fs.IntVar(&limits.TokensPerMinute, "tpm", 0, "create, limits: tokens per minute the API key may use (0: the coordinator's --key-tpm; -1: unlimited)")
	fs.IntVar(&limits.Concurrent, "concurrent", 0, "create, limits: requests the API key may have in flight at once (0: the coordinator's --key-concurrent; -1: unlimited)")
	serviceTier := fs.String("service-tier", "", "create: the service tier of the API key's requests that name none: priority (gold), default (silver) or flex (bronze)")
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, keysAbout+"\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := bindEnv(fs); err != nil {
		return err
	}
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return errUsage
	}
	var target string // the key of limits, tier and revoke
	if verb == "limits" || verb == "tier" || verb == "revoke" {
		args, err := positional(fs)
		if err != nil {
			return errUsage
		}
		switch {
		case verb == "tier" && len(args) != 2:
			fmt.Fprintln(stderr, "tier takes one key id or prefix and a tier: priority, default or flex")
			return errUsage
		case verb == "tier":
			*serviceTier = args[1]
		case len(args) != 1:
			fmt.Fprintln(stderr, verb+" takes one key id or prefix")
			return errUsage
		}
		target = args[0]
	}
	if err := checkRateLimits(limits, *provider); err != nil {
		return err
	}
	kind := store.KeyBuyer
	if *provider {
		kind = store.KeyProvider
	}
	keyTier, err := keyServiceTier(*serviceTier, *provider)
	if err != nil {
		return err
	}
	var keyCap *store.Cap
	if verb == "create" {
		if keyCap, err = keyLimit(fs, *limit, *period, *provider); err != nil {
			return err
		}
		if *routing != "" {
			if _, err := matcher.ParsePrefs(json.RawMessage(*routing)); err != nil {
				return fmt.Errorf("--routing: %w", err)
			}
		}
	}
	st, err := db.openOrCreate(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	switch verb {
	case "create":
		acct, err := localnet.EnsureAccount(ctx, st, *account)
		if err != nil {
			return err
		}
		secret, k, err := ops.CreateKey(ctx, st, ops.NewKey{AccountID: acct.ID, Kind: kind, Name: *name,
			Models: strings.Split(*models, ","), Routing: []byte(*routing), Split: []byte(*split), Limits: limits, ServiceTier: keyTier,
			Cap: keyCap, At: time.Now()})
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Created %s %s for account %s. Keep it safe: it is shown only this once.\n", kind, k.ID, acct.Name)
		if keyCap != nil {
			per := map[string]string{store.Daily: "day", store.Weekly: "week", store.Monthly: "month"}[keyCap.Period]
			fmt.Fprintf(stderr, "It can spend at most $%s a %s (UTC).\n", keyCap.Limit, per)
		}
		if limits != (store.RateLimits{}) {
			fmt.Fprintf(stderr, "Its rate limits: %s.\n", describeLimits(limits))
		}
		if isSet(fs, "service-tier") {
			fmt.Fprintf(stderr, "Its requests run at %s unless they name a service_tier.\n", describeTier(keyTier))
		}
		if k.Split != nil {
			fmt.Fprintf(stderr, "Its requests that set no split are split as %s, the rest to the model they name.\n", k.Split)
		}
		fmt.Fprintln(stdout, secret)
		return nil
	case "list":
		accountID := ""
		if isSet(fs, "account") {
			acct, err := st.Account(ctx, *account)
			if err != nil {
				return fmt.Errorf("account %s: %w", *account, err)
			}
			accountID = acct.ID
		}
		keys, err := st.Keys(ctx, accountID, kind)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPREFIX\tACCOUNT\tNAME\tCREATED\tSTATUS\tRATE LIMITS\tTIER")
		names := map[string]string{}
		for _, k := range keys {
			if _, ok := names[k.AccountID]; !ok {
				names[k.AccountID] = k.AccountID
				if a, err := st.Account(ctx, k.AccountID); err == nil {
					names[k.AccountID] = a.Name
				}
			}
			status, rate, svc := "active", shortLimits(k.Limits), describeTier(k.ServiceTier)
			if k.Kind == store.KeyProvider {
				rate, svc = "-", "-"
			}
			if k.Revoked() {
				status = "revoked " + k.RevokedAt.UTC().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, names[k.AccountID], k.Name, k.CreatedAt.UTC().Format(time.DateTime), status, rate, svc)
		}
		return tw.Flush()
	case "limits":
		k, err := st.SetKeyLimits(ctx, target, limits)
		if err != nil {
			return fmt.Errorf("limits of %s: %w", target, err)
		}
		fmt.Fprintf(stdout, "Limits of %s (%s…): %s.\n", k.ID, k.Prefix, describeLimits(k.Limits))
		return nil
	case "tier":
		k, err := st.SetKeyServiceTier(ctx, target, keyTier)
		if err != nil {
			return fmt.Errorf("tier of %s: %w", target, err)
		}
		fmt.Fprintf(stdout, "Service tier of %s (%s…): %s.\n", k.ID, k.Prefix, describeTier(k.ServiceTier))
		return nil
	default: // revoke
		k, err := st.RevokeKey(ctx, target, time.Now())
		if err != nil {
			return fmt.Errorf("revoke %s: %w", target, err)
		}
		fmt.Fprintf(stdout, "Revoked %s (%s…).\n", k.ID, k.Prefix)
		return nil
	}
}

// keyLimit reads keys create's --limit and --period: nil when no limit is asked for.
func keyLimit(fs *flag.FlagSet, limit, period string, provider bool) (*store.Cap, error) {
	if limit == "" {
		if isSet(fs, "period") {
			return nil, errors.New("--period needs a --limit")
		}
		return nil, nil
	}
	if provider {
		return nil, errors.New("--limit caps an API key's spending; a provider token spends nothing")
	}
	n, err := money.ParseUSD(limit)
	if err != nil {
		return nil, fmt.Errorf("--limit: %w", err)
	}
	if n <= 0 {
		return nil, fmt.Errorf("--limit: %s is not a positive amount of USD", limit)
	}
	if !store.ValidPeriod(period) {
		return nil, fmt.Errorf("--period: %q is not daily, weekly or monthly", period)
	}
	return &store.Cap{Period: period, Limit: n}, nil
}

// positional reads the arguments that are not flags, which may come before, between or after
// the flags ('keys limits KEY --rpm 5' and 'keys limits --rpm 5 KEY').
func positional(fs *flag.FlagSet) ([]string, error) {
	var args []string
	for fs.NArg() > 0 {
		args = append(args, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return nil, err
		}
	}
	return args, nil
}

// keyServiceTier reads --service-tier (or keys tier's argument) by OpenAI's or ShareAI's name,
// into the name an API key stores: tier.Tier's String. A provider token has none.
func keyServiceTier(name string, provider bool) (string, error) {
	t, err := tier.Parse(name)
	switch {
	case err != nil:
		return "", err
	case provider && name != "":
		return "", errors.New("--service-tier is an API key's; a provider token makes no requests")
	case provider:
		return "", nil
	}
	return t.String(), nil
}

// describeTier names a stored tier as a buyer names it, with ShareAI's name: "priority (gold)".
func describeTier(name string) string {
	t, err := tier.Parse(name)
	if err != nil {
		return name
	}
	return t.OpenAI() + " (" + t.String() + ")"
}

// checkRateLimits checks --rpm, --tpm and --concurrent.
func checkRateLimits(l store.RateLimits, provider bool) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"rpm", l.RequestsPerMinute}, {"tpm", l.TokensPerMinute}, {"concurrent", l.Concurrent}} {
		if f.v < -1 {
			return fmt.Errorf("--%s: %d is not a limit: give a number, 0 for the coordinator's default or -1 for none", f.name, f.v)
		}
	}
	if provider && l != (store.RateLimits{}) {
		return errors.New("--rpm, --tpm and --concurrent limit an API key; a provider token makes no requests")
	}
	return nil
}

// describeLimits says a key's rate limits in words.
func describeLimits(l store.RateLimits) string {
	one := func(v int, unit string) string {
		switch {
		case v > 0:
			return fmt.Sprintf("%d %s", v, unit)
		case v < 0:
			return "no limit of " + unit
		}
		return "the coordinator's default " + unit
	}
	return one(l.RequestsPerMinute, "requests per minute") + ", " + one(l.TokensPerMinute, "tokens per minute") + ", " +
		one(l.Concurrent, "requests at once")
}

// shortLimits is a key's rate limits in a column: "60 rpm, 90000 tpm, 3 at once", where a
// default is left out and a lifted limit shows as "no rpm"; "default" when all are defaults.
func shortLimits(l store.RateLimits) string {
	var parts []string
	for _, f := range []struct {
		v    int
		unit string
	}{{l.RequestsPerMinute, "rpm"}, {l.TokensPerMinute, "tpm"}, {l.Concurrent, "at once"}} {
		switch {
		case f.v > 0:
			parts = append(parts, fmt.Sprintf("%d %s", f.v, f.unit))
		case f.v < 0 && f.unit == "at once":
			parts = append(parts, "any number at once")
		case f.v < 0:
			parts = append(parts, "no "+f.unit)
		}
	}
	if len(parts) == 0 {
		return "default"
	}
	return strings.Join(parts, ", ")
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/store"
	"github.com/shareai/shareai/internal/store/sqlstore"
)

const adminAbout = `Operate the network: credit buyers, pay providers out, set spend limits, set nodes'
trust levels and suspend cheats, and read the audit log.

  shareai admin credit   ACCOUNT AMOUNT [--ref REF]
  shareai admin accounts
  shareai admin payout   ACCOUNT AMOUNT|all [--ref REF] [--csv FILE]
  shareai admin cap      ACCOUNT|--key KEY-ID --period daily|weekly|monthly --limit USD
  shareai admin node level   NODE new|verified|trusted|quarantined --reason TEXT [--actor NAME]
  shareai admin node suspend NODE --reason TEXT [--actor NAME]
  shareai admin audit    [--target NODE] [--limit 50]
  shareai admin user role EMAIL buyer|provider|admin [--remove] [--actor NAME]

Amounts are USD, such as 12.5 or 0.000001. 'admin' works on the coordinator's database
directly: run it on the coordinator's machine with the same --data-dir (or --db); the
coordinator need not be stopped. Accounts are made by 'shareai keys create --account NAME'.

A --ref names a credit or a payout and makes it idempotent: run again with the same --ref,
it does nothing more, so a retry never pays twice. Without --ref a random one is made and
printed. 'payout … all' pays out all the account's available earnings; --csv appends a line
(time, account, amount_usd, ref) to FILE for the books. A cap limits what a key, or an
account's keys together, can spend per UTC day, week (from Monday) or month; --limit 0
removes it.

'node level' and 'node suspend' change a node's trust level, with a reason, and record the
change in the audit log; a running coordinator picks up level changes from the database
within a minute. Suspending a node also returns its pending earnings to the buyers who paid
them.`

func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verbs := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"credit": adminCredit, "accounts": adminAccounts, "payout": adminPayout, "cap": adminCap,
		"node": adminNode, "audit": adminAudit, "user": adminUser,
	}
	if len(args) == 0 || verbs[args[0]] == nil {
		w, err := stderr, errUsage
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			w, err = stdout, nil
		} else if len(args) > 0 {
			fmt.Fprintf(stderr, "unknown admin command %q\n\n", args[0])
		}
		fmt.Fprintln(w, adminAbout+"\n\nFlags: --data-dir DIR (default ./.shareai) or --db URL; see 'shareai admin credit --help'.")
		return err
	}
	return verbs[args[0]](ctx, args[1:], stdout, stderr)
}

// dbFlags name the coordinator's database.
type dbFlags struct{ dataDir, db string }

func (d *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.dataDir, "data-dir", "./.shareai", "the coordinator's data directory, holding its SQLite database")
	fs.StringVar(&d.db, "db", "", "the coordinator's PostgreSQL URL, instead of SQLite in --data-dir")
}

// open opens the coordinator's existing database: unlike the coordinator, it never creates one,
// so a wrong --data-dir is an error rather than an empty network.
func (d *dbFlags) open(ctx context.Context) (*sqlstore.DB, error) {
	if d.db != "" {
		return d.openURL(ctx)
	}
	path := filepath.Join(d.dataDir, "coordinator.db")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no coordinator database in %s (%w); pass the coordinator's --data-dir or --db", d.dataDir, err)
	}
	return sqlstore.Open(ctx, path)
}

// openOrCreate opens the coordinator's database, creating a SQLite one if there is none yet
// (keys may be made before the coordinator first starts).
func (d *dbFlags) openOrCreate(ctx context.Context) (*sqlstore.DB, error) {
	if d.db != "" {
		return d.openURL(ctx)
	}
	return openStore(ctx, d.dataDir)
}

// openURL opens the PostgreSQL database --db names.
func (d *dbFlags) openURL(ctx context.Context) (*sqlstore.DB, error) {
	if !strings.HasPrefix(d.db, "postgres://") && !strings.HasPrefix(d.db, "postgresql://") {
		return nil, fmt.Errorf("--db %q: want a PostgreSQL URL such as postgres://user@host:5432/shareai (SQLite lives in --data-dir)", d.db)
	}
	return sqlstore.Open(ctx, d.db)
}

// parseVerb parses a sub-verb's flags, which may come before, between or after its arguments,
// and checks it got between lo and hi arguments. It returns the arguments.
func parseVerb(fs *flag.FlagSet, args []string, stderr io.Writer, usage string, lo, hi int) ([]string, error) {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	if err := bindEnv(fs); err != nil {
		return nil, err
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) < lo || len(pos) > hi {
		fmt.Fprintf(stderr, "shareai %s: wrong number of arguments\n", fs.Name())
		fs.Usage()
		return nil, errUsage
	}
	return pos, nil
}

// account finds an account by name or id, refusing unknown ones.
func account(ctx context.Context, st store.Store, name string) (*store.Account, error) {
	a, err := st.Account(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("no account %q: accounts are made by 'shareai keys create --account %s'", name, name)
	}
	return a, err
}

// parseAmount reads a positive amount of USD.
func parseAmount(what, s string) (money.Nanos, error) {
	n, err := money.ParseUSD(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("%s: %s is not a positive amount of USD", what, s)
	}
	return n, nil
}

func newRef(kind string) string {
	var b [8]byte
	rand.Read(b[:])
	return kind + "-" + hex.EncodeToString(b[:])
}

func adminCredit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin credit", flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	ref := fs.String("ref", "", "names the deposit, so that a retry credits once (default: a random ref, printed)")
	pos, err := parseVerb(fs, args, stderr, `Credit a buyer's balance with money received outside ShareAI.

Usage: shareai admin credit ACCOUNT AMOUNT [--ref REF]`, 2, 2)
	if err != nil {
		return err
	}
	amount, err := parseAmount("amount", pos[1])
	if err != nil {
		return err
	}
	if *ref == "" {
		*ref = newRef("credit")
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := account(ctx, st, pos[0])
	if err != nil {
		return err
	}
	err = st.Deposit(ctx, a.ID, amount, *ref, time.Now())
	switch {
	case errors.Is(err, store.ErrConflict):
		fmt.Fprintf(stderr, "The ref %s was used already: nothing more credited. (If this is not a retry, pass a new --ref.)\n", *ref)
	case err != nil:
		return err
	default:
		fmt.Fprintf(stdout, "Credited $%s to %s (ref %s).\n", amount, a.Name, *ref)
	}
	b, err := st.Balance(ctx, a.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Balance of %s: $%s ($%s held by requests in flight).\n", a.Name, b.Credits, b.Held)
	return nil
}

func adminAccounts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin accounts", flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	if _, err := parseVerb(fs, args, stderr, `List the accounts with their money in USD: as buyers, the balance, what requests in
flight hold of it and what was spent; as providers, earnings pending release, available
to pay out, and paid out.

Usage: shareai admin accounts`, 0, 0); err != nil {
		return err
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	as, err := st.Accounts(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tBALANCE\tHELD\tSPENT\tPENDING\tAVAILABLE\tPAID OUT")
	for _, a := range as {
		b, err := st.Balance(ctx, a.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t$%s\t$%s\t$%s\t$%s\t$%s\t$%s\n", a.Name, a.ID, b.Credits, b.Held, b.Spent, b.Pending, b.Available, b.PaidOut)
	}
	return tw.Flush()
}

func adminPayout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin payout", flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	ref := fs.String("ref", "", "names the payout, so that a retry pays once (default: a random ref, printed)")
	csvPath := fs.String("csv", "", "append a line (time, account, amount_usd, ref) to this CSV file")
	pos, err := parseVerb(fs, args, stderr, `Pay a provider's available earnings out (the money leaves ShareAI's books), all of
them or an amount in USD. Earnings become available once their settlement delay passes.

Usage: shareai admin payout ACCOUNT AMOUNT|all [--ref REF] [--csv FILE]`, 2, 2)
	if err != nil {
		return err
	}
	var amount money.Nanos
	if pos[1] != "all" {
		if amount, err = parseAmount("amount", pos[1]); err != nil {
			return err
		}
	}
	refGiven := *ref != ""
	if !refGiven {
		*ref = newRef("payout")
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := account(ctx, st, pos[0])
	if err != nil {
		return err
	}
	b, err := st.Balance(ctx, a.ID)
	if err != nil {
		return err
	}
	if amount == 0 {
		if b.Available <= 0 {
			if refGiven {
				// Most likely a retry of a payout that went through: nothing to do either way.
				fmt.Fprintf(stderr, "%s has nothing available to pay out ($%s pending release); nothing paid.\n", a.Name, b.Pending)
				return nil
			}
			return fmt.Errorf("%s has nothing available to pay out ($%s pending release)", a.Name, b.Pending)
		}
		amount = b.Available
	}
	at := time.Now()
	err = st.Payout(ctx, a.ID, amount, *ref, at)
	switch {
	case errors.Is(err, store.ErrConflict):
		fmt.Fprintf(stderr, "The ref %s was used already: nothing more paid out. (If this is not a retry, pass a new --ref.)\n", *ref)
		return nil
	case errors.Is(err, store.ErrInsufficient):
		if b, err := st.Balance(ctx, a.ID); err == nil {
			return fmt.Errorf("%s has $%s available to pay out, less than $%s ($%s pending release)", a.Name, b.Available, amount, b.Pending)
		}
		return err
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "Paid out $%s to %s (ref %s).\n", amount, a.Name, *ref)
	if *csvPath != "" {
		if err := appendCSV(*csvPath, []string{at.UTC().Format(time.RFC3339), a.Name, amount.String(), *ref}); err != nil {
			return fmt.Errorf("the payout %s is made, but recording it: %w", *ref, err)
		}
	}
	if b, err = st.Balance(ctx, a.ID); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s now has $%s available, $%s pending, $%s paid out in all.\n", a.Name, b.Available, b.Pending, b.PaidOut)
	return nil
}

// appendCSV appends a record to a CSV file, with a header line when the file is new or empty.
func appendCSV(path string, record []string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	w := csv.NewWriter(f)
	if fi.Size() == 0 {
		w.Write([]string{"time", "account", "amount_usd", "ref"})
	}
	w.Write(record)
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func adminCap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin cap", flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	keyID := fs.String("key", "", "cap this API key (its id, key_…, or its prefix, sk-…) instead of an account")
	period := fs.String("period", "", "the cap's window: daily, weekly or monthly (UTC; weeks start on Monday)")
	limit := fs.String("limit", "", "the most that can be spent per window, in USD; 0 removes the cap")
	pos, err := parseVerb(fs, args, stderr, `Set or remove a spend cap: on an account (all its keys together) or on one API key.
A request that could take the spending over the cap is refused with 402. The spending counts
from the window's start, so a cap set or changed mid-window counts what was spent before it.

Usage: shareai admin cap ACCOUNT|--key KEY-ID --period daily|weekly|monthly --limit USD`, 0, 1)
	if err != nil {
		return err
	}
	if (len(pos) == 1) == (*keyID != "") || *period == "" || *limit == "" {
		fmt.Fprintln(stderr, "shareai admin cap: name an ACCOUNT or a --key (not both), with --period and --limit")
		fs.Usage()
		return errUsage
	}
	if !store.ValidPeriod(*period) {
		return fmt.Errorf("--period: %q is not daily, weekly or monthly", *period)
	}
	n, err := money.ParseUSD(*limit)
	if err != nil {
		return fmt.Errorf("--limit: %w", err)
	}
	if n < 0 {
		return fmt.Errorf("--limit: %s is negative; 0 removes the cap", *limit)
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	var scope, what string
	if *keyID != "" {
		k, err := buyerKey(ctx, st, *keyID)
		if err != nil {
			return err
		}
		scope, what = store.KeyScope(k.ID), fmt.Sprintf("API key %s (%s…)", k.ID, k.Prefix)
	} else {
		a, err := account(ctx, st, pos[0])
		if err != nil {
			return err
		}
		scope, what = store.AccountScope(a.ID), "account "+a.Name
	}
	if err := st.SetCap(ctx, store.Cap{Scope: scope, Period: *period, Limit: n}); err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintf(stdout, "Removed the %s spend cap of %s.\n", *period, what)
		return nil
	}
	fmt.Fprintf(stdout, "Set a %s spend cap of $%s on %s.\n", *period, n, what)
	now := time.Now()
	spends, err := st.Spending(ctx, now, scope)
	if err != nil {
		return err
	}
	for _, sp := range spends {
		if sp.Period == *period {
			fmt.Fprintf(stdout, "Spent in this window: $%s ($%s held); it resets at %s.\n", sp.Spent, sp.Held, sp.ResetsAt.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// buyerKey finds a valid API key by its id or its prefix.
func buyerKey(ctx context.Context, st store.Store, idOrPrefix string) (*store.Key, error) {
	idOrPrefix = strings.TrimSuffix(idOrPrefix, "…")
	keys, err := st.Keys(ctx, "", store.KeyBuyer)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.ID == idOrPrefix || k.Prefix == idOrPrefix {
			if k.Revoked() {
				return nil, fmt.Errorf("API key %s (%s…) is revoked", k.ID, k.Prefix)
			}
			return k, nil
		}
	}
	return nil, fmt.Errorf("no API key %q: 'shareai keys list' lists them", idOrPrefix)
}

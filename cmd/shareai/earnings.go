package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/shareai/shareai/internal/store"
)

// runProviderEarnings is 'shareai provider earnings': a provider account's earnings, read from
// the coordinator's database as 'keys' and 'admin' do. Providers elsewhere ask the coordinator:
// GET /v1/provider/earnings with their provider token.
func runProviderEarnings(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("provider earnings", flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	name := fs.String("account", "default", "the provider's account")
	days := fs.Int("days", 30, "how many days to show, today included (1 to 366)")
	if _, err := parseVerb(fs, args, stderr, `Show a provider account's earnings per node and UTC day, in USD: pending (waiting for
the settlement delay) and available (released, paid out or not), then the account's totals.
It reads the coordinator's database: run it on the coordinator's machine with its
--data-dir (or --db). Elsewhere, GET /v1/provider/earnings?days=30 with the provider token.

Usage: shareai provider earnings [--account NAME] [--days 30]`, 0, 0); err != nil {
		return err
	}
	if *days < 1 || *days > 366 {
		return fmt.Errorf("--days: %d is not from 1 to 366", *days)
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := account(ctx, st, *name)
	if err != nil {
		return err
	}
	since := store.WindowStart(store.Daily, time.Now()).AddDate(0, 0, -(*days - 1))
	es, err := st.Earnings(ctx, a.ID, since)
	if err != nil {
		return err
	}
	b, err := st.Balance(ctx, a.ID)
	if err != nil {
		return err
	}
	if len(es) == 0 {
		fmt.Fprintf(stdout, "No earnings since %s.\n", since.Format(time.DateOnly))
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	if len(es) > 0 {
		fmt.Fprintln(tw, "DATE\tNODE\tNAME\tPENDING\tAVAILABLE")
	}
	names := map[string]string{}
	for _, e := range es {
		n, ok := names[e.NodeID]
		if !ok {
			node, err := st.Node(ctx, e.NodeID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if node != nil {
				n = node.Name
			}
			names[e.NodeID] = n
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t$%s\t$%s\n", e.Day.UTC().Format(time.DateOnly), e.NodeID, n, e.Pending, e.Available)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Totals for %s: $%s pending, $%s available, $%s paid out.\n", a.Name, b.Pending, b.Available, b.PaidOut)
	return nil
}

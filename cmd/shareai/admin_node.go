package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shareai/shareai/internal/ops"
	"github.com/shareai/shareai/internal/store"
)

// adminNode runs 'admin node level' and 'admin node suspend'.
func adminNode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verbs := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"level": adminNodeLevel, "suspend": adminNodeSuspend,
	}
	if len(args) == 0 || verbs[args[0]] == nil {
		w, err := stderr, errUsage
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			w, err = stdout, nil
		} else if len(args) > 0 {
			fmt.Fprintf(stderr, "unknown admin node command %q\n\n", args[0])
		}
		fmt.Fprintln(w, `Set a node's trust level, or suspend it.

  shareai admin node level   NODE new|verified|trusted|quarantined --reason TEXT [--actor NAME]
  shareai admin node suspend NODE --reason TEXT [--actor NAME]

See 'shareai admin node level --help'.`)
		return err
	}
	return verbs[args[0]](ctx, args[1:], stdout, stderr)
}

// actorFlag names the operator in the audit log.
func actorFlag(fs *flag.FlagSet) *string {
	return fs.String("actor", "", "your name, recorded in the audit log as admin:NAME (default: $USER, or admin)")
}

// auditActor is the audit log's actor for an operator named name (default: $USER, or "admin").
func auditActor(name string) string {
	if name == "" {
		name = os.Getenv("USER")
	}
	if name == "" {
		name = "admin"
	}
	return "admin:" + name
}

// needReason trims --reason and refuses an empty one.
func needReason(fs *flag.FlagSet, reason *string, stderr io.Writer) error {
	*reason = strings.TrimSpace(*reason)
	if *reason == "" {
		fmt.Fprintf(stderr, "shareai %s: --reason is required: say why, for the audit log\n", fs.Name())
		fs.Usage()
		return errUsage
	}
	return nil
}

// nodeError explains an operation's error about a node given on the command line.
func nodeError(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no node %q: give a node's id (node_…), as 'shareai provider status' or the console shows it", id)
	}
	return err
}

// notLive says, after a level change, that this process reaches no live fleet (on stderr,
// beside the change on stdout).
const notLive = "A running coordinator gives the node its new level within a minute (when its prober next scores the nodes)."

func adminNodeLevel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin node level", flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	reason := fs.String("reason", "", "why (required); recorded with the level and in the audit log")
	actor := actorFlag(fs)
	pos, err := parseVerb(fs, args, stderr, `Set a node's trust level: new (onboarding checks pending), verified (passed them),
trusted (a good record), or quarantined (no live traffic, still probed). To suspend a cheat,
use 'shareai admin node suspend', which also claws back its pending earnings.

The change and its reason are recorded in the audit log ('shareai admin audit'), in the same
transaction. This command reaches only the database: a running coordinator picks up level
changes from it within a minute (the console's admin page applies them at once).

Usage: shareai admin node level NODE new|verified|trusted|quarantined --reason TEXT [--actor NAME]`, 2, 2)
	if err != nil {
		return err
	}
	if err := needReason(fs, reason, stderr); err != nil {
		return err
	}
	level := pos[1]
	if level == store.LevelSuspended {
		return fmt.Errorf("to suspend node %s, use 'shareai admin node suspend %s --reason …': it also claws back its pending earnings", pos[0], pos[0])
	}
	if !slices.Contains(ops.SettableLevels, level) {
		return fmt.Errorf("level %q: want one of %s", level, strings.Join(ops.SettableLevels, ", "))
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := ops.SetNodeLevel(ctx, st, nil, level, ops.Decision{NodeID: pos[0], Reason: *reason, Actor: auditActor(*actor), At: time.Now()})
	if err != nil {
		return nodeError(pos[0], err)
	}
	fmt.Fprintf(stdout, "Node %s (%s): %s → %s (%s).\n", res.Node.ID, res.Node.Name, res.From, res.To, *reason)
	fmt.Fprintln(stderr, notLive)
	return nil
}

func adminNodeSuspend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin node suspend", flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	reason := fs.String("reason", "", "why (required); recorded with the level and in the audit log")
	actor := actorFlag(fs)
	pos, err := parseVerb(fs, args, stderr, `Suspend a node that cheated: it gets no more work, and its earnings still pending release
go back to the buyers who paid them, with the platform's fee on them. Earnings already
released to its provider are not touched.

The suspension, the clawback and their audit log entries ('shareai admin audit') are one
transaction: if it fails, nothing is changed, and the suspension can be run again. This
command reaches only the database: a running coordinator picks up level changes from it
within a minute (the console's admin page applies them at once).

Usage: shareai admin node suspend NODE --reason TEXT [--actor NAME]`, 1, 1)
	if err != nil {
		return err
	}
	if err := needReason(fs, reason, stderr); err != nil {
		return err
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := ops.SuspendNode(ctx, st, nil, ops.Decision{NodeID: pos[0], Reason: *reason, Actor: auditActor(*actor), At: time.Now()})
	if err != nil {
		return nodeError(pos[0], err)
	}
	fmt.Fprintf(stdout, "Node %s (%s): %s → %s (%s).\n", res.Node.ID, res.Node.Name, res.From, res.To, *reason)
	fmt.Fprintf(stdout, "Clawed back $%s: the node's pending earnings, returned to the buyers who paid them with the platform's fee on them (ref %s).\n", res.ClawedBack, res.Ref)
	fmt.Fprintln(stderr, notLive)
	return nil
}

func adminAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin audit", flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	target := fs.String("target", "", "only the entries about this node (or other target)")
	limit := fs.Int("limit", 50, "show at most this many entries, the newest")
	if _, err := parseVerb(fs, args, stderr, `List the audit log, newest first: operators' decisions ('admin node …') and the
coordinator's own changes of nodes' levels.

Usage: shareai admin audit [--target NODE] [--limit 50]`, 0, 0); err != nil {
		return err
	}
	if *limit <= 0 {
		return fmt.Errorf("--limit: %d is not a positive number of entries", *limit)
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	es, err := st.AuditLog(ctx, *target, *limit)
	if err != nil {
		return err
	}
	if len(es) == 0 {
		if *target != "" {
			fmt.Fprintf(stdout, "No audit entries about %s.\n", *target)
		} else {
			fmt.Fprintln(stdout, "No audit entries.")
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tACTOR\tACTION\tTARGET\tDETAIL")
	for _, e := range es {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.At.UTC().Format(time.RFC3339), e.Actor, e.Action, e.Target, oneLine(e.Detail))
	}
	return tw.Flush()
}

// oneLine keeps a table's cell on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// adminUser runs 'admin user role EMAIL ROLE [--remove]': it grants a console user a role, or
// removes one, and records it in the audit log. Admin is granted only so: sign-up never gives it.
func adminUser(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const about = `Grant a console user a role, or remove one with --remove: buyer, provider or admin. An
admin can open every page of the console; sign-up never makes one. Granting provider also
marks the user's account as a provider. The change is recorded in the audit log, and takes
effect on the user's next page.

Usage: shareai admin user role EMAIL buyer|provider|admin [--remove] [--actor NAME]`
	if len(args) == 0 || args[0] != "role" {
		w, err := stderr, errUsage
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			w, err = stdout, nil
		} else if len(args) > 0 {
			fmt.Fprintf(stderr, "unknown admin user command %q\n\n", args[0])
		}
		fmt.Fprintln(w, about)
		return err
	}
	fs := flag.NewFlagSet("admin user role", flag.ContinueOnError)
	var db dbFlags
	db.register(fs)
	remove := fs.Bool("remove", false, "remove the role instead of granting it")
	actor := actorFlag(fs)
	pos, err := parseVerb(fs, args[1:], stderr, about, 2, 2)
	if err != nil {
		return err
	}
	email, role := strings.ToLower(strings.TrimSpace(pos[0])), pos[1]
	roles := []string{store.RoleBuyer, store.RoleProvider, store.RoleAdmin}
	if !slices.Contains(roles, role) {
		return fmt.Errorf("role %q: want one of %s", role, strings.Join(roles, ", "))
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	u, err := st.UserByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no console user %q: people sign up in the console, at /signup", email)
	}
	if err != nil {
		return err
	}
	now := time.Now()
	switch {
	case *remove && !u.Has(role):
		fmt.Fprintf(stdout, "%s (%s) does not have the role %s: nothing to do.\n", u.Email, u.ID, role)
		return nil
	case !*remove && u.Has(role):
		fmt.Fprintf(stdout, "%s (%s) has the role %s already: nothing to do.\n", u.Email, u.ID, role)
		return nil
	case *remove && len(u.Roles) == 1:
		return fmt.Errorf("%s has no role but %s: a user needs one; grant another first", u.Email, role)
	}
	next, action := append(slices.Clone(u.Roles), role), "user.role.grant"
	if *remove {
		next, action = slices.DeleteFunc(slices.Clone(u.Roles), func(r string) bool { return r == role }), "user.role.remove"
	}
	slices.Sort(next)
	if role == store.RoleProvider && !*remove {
		if err := st.MarkProvider(ctx, u.AccountID); err != nil {
			return err
		}
	}
	if err := st.SetUserRoles(ctx, u.ID, next); err != nil {
		return err
	}
	if err := st.AddAudit(ctx, &store.AuditEntry{At: now, Actor: auditActor(*actor), Action: action, Target: u.ID,
		Detail: fmt.Sprintf("%s %s: roles %s → %s", u.Email, role, strings.Join(u.Roles, ","), strings.Join(next, ","))}); err != nil {
		return fmt.Errorf("the roles are set, but recording it in the audit log: %w", err)
	}
	fmt.Fprintf(stdout, "%s (%s): roles %s.\n", u.Email, u.ID, strings.Join(next, ", "))
	return nil
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// ErrClosed is returned when a hold was already settled or voided: settling is idempotent, so
// callers treat it as done.
var ErrClosed = errors.New("hold already closed")

// Periods of a spend cap. Windows are in UTC; weeks start on Monday.
const (
	Daily   = "daily"
	Weekly  = "weekly"
	Monthly = "monthly"
)

// WindowStart returns the start of the period's window that holds t, in UTC.
func WindowStart(period string, t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch period {
	case Weekly:
		return day.AddDate(0, 0, -(int(day.Weekday())+6)%7)
	case Monthly:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return day
}

// WindowEnd returns when the period's window that holds t ends (and the cap resets).
func WindowEnd(period string, t time.Time) time.Time {
	start := WindowStart(period, t)
	switch period {
	case Weekly:
		return start.AddDate(0, 0, 7)
	case Monthly:
		return start.AddDate(0, 1, 0)
	}
	return start.AddDate(0, 0, 1)
}

// ValidPeriod reports whether p is a period of a spend cap.
func ValidPeriod(p string) bool { return p == Daily || p == Weekly || p == Monthly }

// Scopes of a spend cap.

// KeyScope is the scope of a cap on one API key.
func KeyScope(keyID string) string { return "key:" + keyID }

// AccountScope is the scope of a cap on an account, all its keys together.
func AccountScope(accountID string) string { return "account:" + accountID }

// Cap is a spend limit over a period.
type Cap struct {
	Scope  string // KeyScope or AccountScope
	Period string
	Limit  money.Nanos
}

// Hold reserves the most a request can cost before it runs.
type Hold struct {
	RequestID string
	AccountID string
	KeyID     string
	Amount    money.Nanos
	CreatedAt time.Time
	// Replica is the coordinator replica that placed the hold, and recovers it after a crash;
	// "" for a hold placed without one (before replicas, or by a ledger without a name), which
	// whoever recovers first at start closes.
	Replica string
	// Checkpoint is the bill of what was delivered by the last checkpoint, nil if none.
	Checkpoint *Settlement
	// Lazy lets the store keep the hold in this process's memory, unwritten, until its
	// request is checkpointed, raised or settled, when it is written closed (settled) or open
	// (the others), or until Writes.WriteLazy writes it open: for a coordinator alone on its
	// store, whose recovery voids an open hold with no checkpoint anyway, a crash losing such
	// a hold with its request moves the same money, none. It still counts against the balance
	// and the caps at once, and Balance, Spending and OpenHolds show it. A store that cannot
	// keep a hold so writes it.
	Lazy bool `json:"-"`
}

// LimitError is a hold refused: by the balance, or by a spend cap.
type LimitError struct {
	Cap       *Cap        // nil when the balance is what is short
	Available money.Nanos // what the balance or the cap's window still allows
	Need      money.Nanos // the hold asked for
	ResetsAt  time.Time   // when the cap's window ends; zero for the balance
}

func (e *LimitError) Error() string {
	if e.Cap == nil {
		return fmt.Sprintf("insufficient credits: $%s available, the request may cost up to $%s", e.Available, e.Need)
	}
	return fmt.Sprintf("%s %s spend limit of $%s reached: $%s left, the request may cost up to $%s; resets at %s",
		e.Cap.Period, e.Cap.Scope, e.Cap.Limit, e.Available, e.Need, e.ResetsAt.Format(time.RFC3339))
}

// Part is what one node earns for its part of a request.
type Part struct {
	NodeID     string
	ProviderID string // the node's provider account
	Earned     money.Nanos
	// AskWindow and Surge are the ask the part was billed at, for the provider's report: the
	// ask schedule's window ("" the flat ask) and the surge multiplier in basis points
	// (0 or 10000: ×1).
	AskWindow string
	Surge     int64
}

// Settlement closes a hold at what the request really cost: the buyer pays Debit and the
// platform Subsidy, which together are exactly the parts' earnings plus Fee. A settlement with
// no debit voids the hold.
type Settlement struct {
	RequestID string
	Debit     money.Nanos
	Fee       money.Nanos
	// Subsidy is what the platform pays nodes beyond what the buyer pays: the prompt a node
	// that continued another's answer read again. It comes out of the fees.
	Subsidy   money.Nanos
	Parts     []Part
	ReleaseAt time.Time // when the providers' pending earnings become available
	Usage     *Usage    // the request's record, written in the same transaction
	At        time.Time
	// Flagged lists nodes whose usage claims were implausible and were not billed as claimed;
	// each one's count of over-claims grows by one.
	Flagged []string
	// Line, for a batch line's request, is the line's result, written in the same transaction
	// only while the line runs under RequestID: a stale attempt's settlement fails with
	// ErrStale and moves no money.
	Line *LineResult `json:"-"`
	// Receipts are the request's jobs' receipts, countersigned, written in the same
	// transaction (a job's receipt stored already is kept), whether or not the settlement
	// itself succeeds: so a request's usage record is never found without its receipts.
	Receipts []*Receipt `json:"-"`
}

// Balance is an account's money.
type Balance struct {
	Credits   money.Nanos // buyer balance, holds not deducted
	Held      money.Nanos // open holds
	Deposited money.Nanos // all deposits, ever
	Spent     money.Nanos // all settled debits, ever
	Pending   money.Nanos // provider earnings not yet available
	Available money.Nanos // provider earnings that can be paid out
	PaidOut   money.Nanos
}

// Spend is a scope's spending in the current window of a period, since the window's start
// (not since the cap was set).
type Spend struct {
	Cap
	Spent    money.Nanos
	Held     money.Nanos
	ResetsAt time.Time
}

// Earning is a node's earnings on one UTC day.
type Earning struct {
	NodeID    string
	Day       time.Time
	Pending   money.Nanos
	Available money.Nanos // released, paid out or not
}

// Ledger is the money part of the store. Every method that moves money is one transaction in
// which the ledger's accounts sum to zero.
type Ledger interface {
	// PlaceHold reserves h.Amount within the buyer's balance (less open holds) and every spend
	// cap of the key and the account, in one atomic step. It returns a *LimitError when it
	// cannot, and ErrConflict for a request id already held.
	PlaceHold(ctx context.Context, h *Hold) error
	// PlaceHolds places holds in one transaction, each as PlaceHold would after the ones
	// before it: errs[i] is hold i's error.
	PlaceHolds(ctx context.Context, hs []*Hold) (errs []error)
	// RaiseHold raises an open hold to amount, within the balance and the caps of the windows
	// it counts in, in one atomic step; a hold already as large is left alone. It returns a
	// *LimitError when it cannot, ErrClosed for a closed hold, ErrNotFound for none.
	RaiseHold(ctx context.Context, requestID string, amount money.Nanos) error
	// Settle closes holds in one transaction. A settlement refused for a reason of its own
	// writes nothing: errs[i] is settlement i's error, ErrClosed when its hold was already
	// closed. A database error fails them all.
	Settle(ctx context.Context, batch []*Settlement) (errs []error)
	// OpenHolds lists the holds not yet settled or voided, with their checkpoints.
	OpenHolds(ctx context.Context) ([]*Hold, error)
	// RenewLease records that a coordinator replica is alive until expires (now is when it
	// said so). A replica whose lease has expired, or that has none, is dead to its peers:
	// ClaimHolds takes its open holds.
	RenewLease(ctx context.Context, replica string, now, expires time.Time) error
	// ReleaseLease deletes a replica's lease, at a clean stop: the holds it left open, if
	// any, are its peers' to claim at once.
	ReleaseLease(ctx context.Context, replica string) error
	// ClaimHolds moves to replica, in one transaction, the open holds of the replicas other
	// than it whose lease expired before now or that have none, taking over (deleting) their
	// leases; with own, also replica's own open holds and those placed without a replica
	// (""). It returns the holds it claimed, with their checkpoints, oldest first. Rows are
	// locked as they are moved, so two replicas claiming at once never both claim a hold.
	ClaimHolds(ctx context.Context, replica string, now time.Time, own bool) ([]*Hold, error)
	// CheckpointHolds records, in one transaction, the bills of what open requests have
	// delivered so far. A hold closed meanwhile keeps its settlement: its checkpoint is dropped.
	CheckpointHolds(ctx context.Context, batch []*Settlement) error
	// Commit places w's holds, then settles its settlements, then records its checkpoints,
	// each as PlaceHolds, Settle and CheckpointHolds would after the ones before, but in one
	// transaction: one commit for them all. It returns each hold's and each settlement's
	// error, and the checkpoints'; a database error fails them all.
	//
	// It is for a store with SerialWrites. Where transactions run side by side, one that locks
	// buyers' rows for holds and then holds' and ledger rows for settlements could deadlock
	// with another; it is retried then, but holds, settlements and checkpoints committed apart
	// never wait for each other so.
	Commit(ctx context.Context, w *Writes) (holds, settlements []error, checkpoints error)
	// SerialWrites reports whether the database runs its write transactions one at a time
	// (SQLite), so that writes queued together gain from sharing one (Commit), rather than
	// side by side (PostgreSQL).
	SerialWrites() bool
	// Deposit credits a buyer's balance from the outside world; ref names the deposit and
	// makes it idempotent (ErrConflict when reused).
	Deposit(ctx context.Context, accountID string, amount money.Nanos, ref string, at time.Time) error
	// ReleaseEarnings makes pending earnings whose release time has come available, and
	// returns how much it released.
	ReleaseEarnings(ctx context.Context, now time.Time) (money.Nanos, error)
	// Payout pays a provider's available earnings to the outside world; ErrInsufficient when
	// less is available. ref makes it idempotent.
	Payout(ctx context.Context, accountID string, amount money.Nanos, ref string, at time.Time) error
	// SetCap sets a spend cap; a zero limit removes it. A cap set or changed mid-window counts
	// what its scope already spent in the current window, settled debits and open holds alike.
	SetCap(ctx context.Context, c Cap) error
	// Spending lists the caps of the scopes with their current windows' spending.
	Spending(ctx context.Context, now time.Time, scopes ...string) ([]Spend, error)
	// Balance returns an account's money.
	Balance(ctx context.Context, accountID string) (*Balance, error)
	// Payouts lists a provider's payouts, newest first, at most limit.
	Payouts(ctx context.Context, accountID string, limit int) ([]Payout, error)
	// Earnings lists a provider's earnings per node and UTC day since a time, newest first.
	Earnings(ctx context.Context, accountID string, since time.Time) ([]Earning, error)
	// LedgerSum returns the sum over all ledger accounts, which is zero.
	LedgerSum(ctx context.Context) (money.Nanos, error)
}

// Writes are ledger writes committed together in one transaction (Ledger.Commit).
type Writes struct {
	Holds       []*Hold       // holds to place
	Settlements []*Settlement // holds to close
	Checkpoints []*Settlement // bills of what running requests delivered so far
	// WriteLazy writes open, after the rest, the lazy holds (Hold.Lazy) the store keeps
	// unwritten that were placed before it; zero: none. Commit reports its failure as the
	// checkpoints' error.
	WriteLazy time.Time
}

// Payout is money paid to a provider, out of its available earnings.
type Payout struct {
	Ref    string // the operator's reference, such as a bank transfer's
	Amount money.Nanos
	At     time.Time
}

// ErrInsufficient is a payout larger than what is available.
var ErrInsufficient = errors.New("insufficient funds")

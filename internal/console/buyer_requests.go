package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/shareai/shareai/internal/receipt"
	"github.com/shareai/shareai/internal/store"
)

// maxRequests is how many requests the log shows, newest first.
const maxRequests = 100

// maxRequestID bounds the ids looked up; ours are far shorter.
const maxRequestID = 128

// requestsPage is /buyer/requests's data.
type requestsPage struct {
	Requests []*store.Usage
	Limit    int
}

func (c *Console) buyerRequests(w http.ResponseWriter, r *http.Request) error {
	us, err := c.cfg.Store.Usages(r.Context(), sessionOf(r).user.AccountID, maxRequests)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "buyer_requests", requestsPage{Requests: us, Limit: maxRequests})
	return nil
}

// requestPage is /buyer/requests/{id}'s data.
type requestPage struct {
	Usage    *store.Usage
	Receipts []receiptRow
}

// receiptRow is one job's receipt as the page shows it.
type receiptRow struct {
	JobID            string
	NodeID           string
	Model            string
	PromptTokens     int
	CompletionTokens int
	OutputSHA256     string
	OutputBytes      int64
	FinishReason     string
	StartedAt        time.Time
	EndedAt          time.Time
	CountersignedAt  time.Time
	// Valid is whether both signatures check out against the keys the receipt names; the
	// buyer pins the coordinator's key with 'shareai receipt verify --coordinator-key'.
	Valid bool
}

// usageOf returns the logged-in account's request that the path's id names, or ErrNotFound:
// for an unknown id, and for another account's.
func (c *Console) usageOf(r *http.Request) (*store.Usage, error) {
	id := r.PathValue("id")
	if !strings.HasPrefix(id, "req_") || len(id) > maxRequestID {
		return nil, store.ErrNotFound
	}
	u, err := c.cfg.Store.UsageByRequest(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if u.AccountID != sessionOf(r).user.AccountID {
		return nil, store.ErrNotFound
	}
	return u, nil
}

func (c *Console) buyerRequest(w http.ResponseWriter, r *http.Request) error {
	u, err := c.usageOf(r)
	if err != nil {
		return err
	}
	rs, err := c.cfg.Store.Receipts(r.Context(), u.RequestID)
	if err != nil {
		return fmt.Errorf("receipts of %s: %w", u.RequestID, err)
	}
	p := requestPage{Usage: u}
	for _, rc := range rs {
		p.Receipts = append(p.Receipts, receiptRowOf(rc))
	}
	c.render(w, r, http.StatusOK, "buyer_request", p)
	return nil
}

// receiptRowOf reads a stored receipt for the page. One that cannot be read shows its job and
// node, marked not valid.
func receiptRowOf(rc *store.Receipt) receiptRow {
	row := receiptRow{JobID: rc.JobID, NodeID: rc.NodeID}
	var s receipt.Signed
	if err := json.Unmarshal(rc.Signed, &s); err != nil {
		return row
	}
	rec, err := s.Verify(nil)
	if err != nil {
		// Still show what it claims, unverified.
		if json.Unmarshal(s.Receipt, &rec) != nil {
			return row
		}
	}
	row.Valid = err == nil
	row.Model, row.PromptTokens, row.CompletionTokens = rec.Model, rec.PromptTokens, rec.CompletionTokens
	row.OutputSHA256, row.OutputBytes, row.FinishReason = rec.OutputSHA256, rec.OutputBytes, rec.FinishReason
	row.StartedAt, row.EndedAt, row.CountersignedAt = rec.StartedAt, rec.EndedAt, s.CountersignedAt
	if rec.NodeID != "" {
		row.NodeID = rec.NodeID
	}
	return row
}

// receiptsFile is receipts.json: GET /v1/generation/receipts's shape, which 'shareai receipt
// verify' reads as it is.
type receiptsFile struct {
	Receipts []json.RawMessage `json:"receipts"`
}

func (c *Console) buyerReceipts(w http.ResponseWriter, r *http.Request) error {
	u, err := c.usageOf(r)
	if err != nil {
		return err
	}
	rs, err := c.cfg.Store.Receipts(r.Context(), u.RequestID)
	if err != nil {
		return fmt.Errorf("receipts of %s: %w", u.RequestID, err)
	}
	out := receiptsFile{Receipts: make([]json.RawMessage, 0, len(rs))}
	for _, rc := range rs {
		out.Receipts = append(out.Receipts, rc.Signed)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode receipts of %s: %w", u.RequestID, err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="receipts-%s.json"`, u.RequestID))
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(append(b, '\n'))
	return nil
}

package gateway

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/shareai/shareai/internal/api"
)

// The receipt endpoints:
//
//	GET /v1/generation/receipts?id=ID   the receipts of one of the caller's requests:
//	                                    {"receipts": [signed receipt, ...]}, one per job
//	GET /v1/receipts/key                the key the coordinator countersigns with (no key needed):
//	                                    {"key": "<base64>", "algorithm": "ed25519"}
//
// 'shareai receipt verify' reads the first's answer as it is, and pins the second's key.
func (g *Gateway) registerReceipts(mux *http.ServeMux) {
	mux.Handle("GET /v1/generation/receipts", g.handle(g.receipts))
	mux.HandleFunc("GET /v1/receipts/key", g.receiptKey)
}

// Receipts is GET /v1/generation/receipts's answer.
type Receipts struct {
	// Receipts are receipt.Signed, as stored: in the order of the request's jobs.
	Receipts []json.RawMessage `json:"receipts"`
}

func (g *Gateway) receipts(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.URL.Query().Get("id")
	if id == "" {
		return api.BadRequest("id", api.CodeInvalidValue, "Missing id: GET /v1/generation/receipts?id=ID, with the id of a completion (chatcmpl-…, cmpl-…) or the X-Request-Id of a request (req_…).")
	}
	u, err := g.usageOf(r, c, id)
	if err != nil {
		return err
	}
	rs, err := g.cfg.Store.Receipts(r.Context(), u.RequestID)
	if err != nil {
		return fmt.Errorf("receipts of %s: %w", u.RequestID, err)
	}
	out := Receipts{Receipts: make([]json.RawMessage, 0, len(rs))}
	for _, rc := range rs {
		out.Receipts = append(out.Receipts, rc.Signed)
	}
	return writeJSON(w, out)
}

// ReceiptKey is GET /v1/receipts/key's answer.
type ReceiptKey struct {
	Key       string `json:"key"` // standard base64, padded
	Algorithm string `json:"algorithm"`
}

func (g *Gateway) receiptKey(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, ReceiptKey{Key: base64.StdEncoding.EncodeToString(g.core.ReceiptKey()), Algorithm: "ed25519"})
}

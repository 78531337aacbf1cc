package receipt

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/shareai/shareai/internal/jsondec"
	"github.com/shareai/shareai/internal/protocol"
)

// MarshalJSON encodes s as encoding/json encodes its fields by their tags, byte for byte,
// without reflection: the agent encodes a receipt for every job and the notary one for every
// job it countersigns, and encoding/json's reflection, and its second pass compacting the
// receipt's raw JSON, cost them 4% of a request's CPU. The receipt's JSON is compacted only
// when it holds white space.
func (s Signed) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, s.sizeJSON())
	b = append(b, `{"receipt":`...)
	switch {
	case s.Receipt == nil:
		b = append(b, "null"...)
	case len(s.Receipt) == 0:
		return nil, errors.New("the receipt is empty: not JSON")
	case bytes.ContainsAny(s.Receipt, " \t\r\n"):
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, s.Receipt); err != nil {
			return nil, fmt.Errorf("the receipt is not JSON: %w", err)
		}
		b = buf.Bytes()
	default:
		b = append(b, s.Receipt...)
	}
	b = appendBytes(append(b, `,"node_key":`...), s.NodeKey)
	b = appendBytes(append(b, `,"node_signature":`...), s.NodeSignature)
	if s.NodeProof != nil {
		b = s.NodeProof.appendJSON(append(b, `,"node_proof":`...))
	}
	if s.RequestID != "" {
		b = protocol.AppendString(append(b, `,"request_id":`...), s.RequestID, true)
	}
	if len(s.CoordinatorKey) > 0 {
		b = appendBytes(append(b, `,"coordinator_key":`...), s.CoordinatorKey)
	}
	if len(s.CoordinatorSignature) > 0 {
		b = appendBytes(append(b, `,"coordinator_signature":`...), s.CoordinatorSignature)
	}
	if s.CoordinatorProof != nil {
		b = s.CoordinatorProof.appendJSON(append(b, `,"coordinator_proof":`...))
	}
	if !s.CountersignedAt.IsZero() {
		t, err := s.CountersignedAt.MarshalJSON() // its errors (a year past 9999) as encoding/json's
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"countersigned_at":`...), t...)
	}
	return append(b, '}'), nil
}

// sizeJSON is about the length of s's JSON: at least, unless its strings need escaping.
func (s *Signed) sizeJSON() int {
	b64 := base64.StdEncoding.EncodedLen
	n := 200 + len(s.Receipt) + len(s.RequestID) + b64(len(s.NodeKey)) + b64(len(s.NodeSignature)) +
		b64(len(s.CoordinatorKey)) + b64(len(s.CoordinatorSignature))
	for _, p := range []*Proof{s.NodeProof, s.CoordinatorProof} {
		if p != nil {
			n += 60 + len(p.Path)*(3+b64(sha256.Size))
		}
	}
	return n
}

// appendJSON appends p as encoding/json encodes it.
func (p *Proof) appendJSON(b []byte) []byte {
	b = strconv.AppendUint(append(b, `{"index":`...), p.Index, 10)
	b = strconv.AppendUint(append(b, `,"size":`...), p.Size, 10)
	b = append(b, `,"path":`...)
	if p.Path == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, h := range p.Path {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendBytes(b, h)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendBytes appends v as encoding/json encodes a []byte: null when nil, else standard
// base64 in a string.
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = base64.StdEncoding.AppendEncode(append(b, '"'), v)
	return append(b, '"')
}

// decodeFast decodes b into s as UnmarshalJSON's encoding/json path would, in one pass
// (jsondec), and reports false, having changed nothing, for anything else: a base64 that does
// not decode (whose error that path words), a countersigned_at, a null, any member it does not
// name. The notary decodes a receipt for every job.
func (s *Signed) decodeFast(b []byte) bool {
	d := jsondec.New(b)
	var v Signed
	var str string
	b64 := func(dst *[]byte) bool { // "" is nil, as UnmarshalJSON has it
		if !d.String(&str) {
			return false
		}
		if str == "" {
			*dst = nil
			return true
		}
		out, err := base64.StdEncoding.DecodeString(str)
		*dst = out
		return err == nil
	}
	ok := d.Object(func(key []byte) bool {
		switch string(key) {
		case "receipt":
			return d.Once(0) && d.Raw(&v.Receipt)
		case "node_key":
			return d.Once(1) && b64((*[]byte)(&v.NodeKey))
		case "node_signature":
			return d.Once(2) && b64(&v.NodeSignature)
		case "node_proof":
			return d.Once(3) && decodeProof(&d, &v.NodeProof)
		case "request_id":
			return d.Once(4) && d.String(&v.RequestID)
		case "coordinator_key":
			return d.Once(5) && b64((*[]byte)(&v.CoordinatorKey))
		case "coordinator_signature":
			return d.Once(6) && b64(&v.CoordinatorSignature)
		case "coordinator_proof":
			return d.Once(7) && decodeProof(&d, &v.CoordinatorProof)
		}
		return false
	})
	if !ok || !d.End() {
		return false
	}
	*s = v
	return true
}

// decodeProof decodes a Proof as encoding/json does into a *Proof.
func decodeProof(d *jsondec.Decoder, p **Proof) bool {
	v := new(Proof)
	var str string
	ok := d.Object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return d.Once(0) && d.Uint64(&v.Index)
		case "size":
			return d.Once(1) && d.Uint64(&v.Size)
		case "path":
			v.Path = [][]byte{}
			return d.Once(2) && d.Array(func() bool {
				if !d.String(&str) {
					return false
				}
				h := make([]byte, base64.StdEncoding.DecodedLen(len(str))) // as encoding/json decodes a []byte
				n, err := base64.StdEncoding.Decode(h, []byte(str))
				v.Path = append(v.Path, h[:n])
				return err == nil
			})
		}
		return false
	})
	*p = v
	return ok
}

// decodeFast decodes a receipt as decode's strict encoding/json path would, in one pass
// (jsondec), and reports false for anything else, which that path then decodes or refuses.
func decodeFast(b []byte) (Receipt, bool) {
	d := jsondec.New(b)
	var r Receipt
	var tok []byte
	ok := d.Object(func(key []byte) bool {
		switch string(key) {
		case "version":
			return d.Once(0) && d.Int(&r.Version)
		case "job_id":
			return d.Once(1) && d.String(&r.JobID)
		case "node_id":
			return d.Once(2) && d.String(&r.NodeID)
		case "model":
			return d.Once(3) && d.String(&r.Model)
		case "prompt_tokens":
			return d.Once(4) && d.Int(&r.PromptTokens)
		case "completion_tokens":
			return d.Once(5) && d.Int(&r.CompletionTokens)
		case "usage_estimated":
			return d.Once(6) && d.Bool(&r.UsageEstimated)
		case "output_sha256":
			return d.Once(7) && d.String(&r.OutputSHA256)
		case "output_bytes":
			return d.Once(8) && d.Int64(&r.OutputBytes)
		case "finish_reason":
			return d.Once(9) && d.String(&r.FinishReason)
		case "started_at":
			return d.Once(10) && d.StringToken(&tok) && r.StartedAt.UnmarshalJSON(tok) == nil
		case "ended_at":
			return d.Once(11) && d.StringToken(&tok) && r.EndedAt.UnmarshalJSON(tok) == nil
		}
		return false
	})
	return r, ok && d.End()
}

package testenv

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/coder/websocket"

	"github.com/shareai/shareai/internal/protocol"
)

// Hostile is a node that speaks the agent protocol by hand, on a WebSocket client of its own
// rather than the agent's: for tests of what the coordinator does with frames no honest agent
// sends (too many offers, oversized frames, inflated usage claims, garbage text). It has a
// node key of its own, so each Hostile is a new node.
//
// Its methods are not safe for concurrent use, but for Close.
type Hostile struct {
	// Key is the node's key; NodeID the id the coordinator gave it, once registered.
	Key    ed25519.PrivateKey
	NodeID string

	ws    *websocket.Conn
	nonce []byte
	queue []protocol.Frame // frames of a message read, not returned yet
}

// DialHostile connects to the network's coordinator with its provider token and reads the
// challenge. The connection closes when the test ends.
func (e *Env) DialHostile(ctx context.Context) (*Hostile, error) {
	h, err := DialHostile(ctx, e.URL, e.ProviderToken)
	if err == nil {
		e.t.Cleanup(func() { h.Close() })
	}
	return h, err
}

// DialHostile connects to the coordinator at baseURL (http://host:port) with a provider token
// and reads the challenge.
func DialHostile(ctx context.Context, baseURL, token string) (*Hostile, error) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	url := "ws" + strings.TrimPrefix(baseURL, "http") + "/v1/agent/connect"
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.SetReadLimit(64 << 20) // as the agent: a job carries a buyer's whole request
	h := &Hostile{Key: key, ws: ws}
	fr, err := h.Read(ctx)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("read challenge: %w", err)
	}
	if fr.Type != protocol.TypeChallenge || fr.Challenge == nil {
		ws.CloseNow()
		return nil, fmt.Errorf("first frame %q, want a challenge", fr.Type)
	}
	h.nonce = fr.Challenge.Nonce
	return h, nil
}

// Register answers the challenge with reg, as protocol.RegisterMessage describes, and returns
// the coordinator's registered frame, or the error the connection ended with: a
// websocket.CloseError when the coordinator refused the node. Register fills in reg's Version
// (protocol.Version), NodeKey and Signature (of the Hostile's key) where they are unset.
func (h *Hostile) Register(ctx context.Context, reg protocol.Register) (*protocol.Registered, error) {
	if reg.Version == 0 {
		reg.Version = protocol.Version
	}
	if reg.NodeKey == nil {
		reg.NodeKey = h.Key.Public().(ed25519.PublicKey)
	}
	if reg.Signature == nil {
		reg.Signature = ed25519.Sign(h.Key, protocol.RegisterMessage(h.nonce))
	}
	if err := h.Send(ctx, protocol.Frame{Type: protocol.TypeRegister, Register: &reg}); err != nil {
		return nil, err
	}
	fr, err := h.Read(ctx)
	if err != nil {
		return nil, err
	}
	if fr.Type != protocol.TypeRegistered || fr.Registered == nil {
		return nil, fmt.Errorf("answer %q to register, want registered", fr.Type)
	}
	h.NodeID = fr.Registered.NodeID
	return fr.Registered, nil
}

// Send sends frames as one message, each a line of JSON, as agents batch them.
func (h *Hostile) Send(ctx context.Context, frames ...protocol.Frame) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, fr := range frames {
		if err := enc.Encode(fr); err != nil {
			return err
		}
	}
	return h.SendRaw(ctx, b.Bytes())
}

// SendRaw sends msg as one message, as it is.
func (h *Hostile) SendRaw(ctx context.Context, msg []byte) error {
	return h.ws.Write(ctx, websocket.MessageText, msg)
}

// Read returns the coordinator's next frame.
func (h *Hostile) Read(ctx context.Context) (protocol.Frame, error) {
	for len(h.queue) == 0 {
		_, msg, err := h.ws.Read(ctx)
		if err != nil {
			return protocol.Frame{}, err
		}
		err = protocol.Decode(msg, func(fr protocol.Frame) error {
			h.queue = append(h.queue, fr)
			return nil
		})
		if err != nil {
			return protocol.Frame{}, err
		}
	}
	fr := h.queue[0]
	h.queue = h.queue[1:]
	return fr, nil
}

// NextJob reads frames until a job frame comes, and returns it.
func (h *Hostile) NextJob(ctx context.Context) (protocol.Frame, error) {
	for {
		fr, err := h.Read(ctx)
		if err != nil || (fr.Type == protocol.TypeJob && fr.Request != nil) {
			return fr, err
		}
	}
}

// Closed reads until the coordinator closes the connection and returns how: its close status
// and reason. It fails if the connection ends another way, or ctx first.
func (h *Hostile) Closed(ctx context.Context) (websocket.CloseError, error) {
	for {
		_, err := h.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return ce, nil
		}
		return ce, fmt.Errorf("connection ended without a close frame: %w", err)
	}
}

// Close closes the connection.
func (h *Hostile) Close() error {
	return h.ws.CloseNow()
}

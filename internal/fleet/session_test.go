package fleet_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shareai/shareai/internal/protocol"
	"github.com/shareai/shareai/internal/testenv"
)

// The node proves it holds its key by signing the domain string and the nonce: a signature of
// the bare nonce (as agents before receipts made) is refused, saying to upgrade.
func TestHandshake_SignsRegisterMessage(t *testing.T) {
	env := testenv.New(t, testenv.Providers(1))
	_, key, _ := ed25519.GenerateKey(nil)
	tests := []struct {
		name    string
		sign    func(nonce []byte) []byte
		refused string // "" if registered
	}{
		{"domain and nonce", func(n []byte) []byte { return ed25519.Sign(key, protocol.RegisterMessage(n)) }, ""},
		{"bare nonce", func(n []byte) []byte { return ed25519.Sign(key, n) }, "upgrade the agent"},
		{"another message", func(n []byte) []byte { return ed25519.Sign(key, protocol.RegisterMessage(append(n, 0))) }, "does not verify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(env.URL, "http")+"/v1/agent/connect", &websocket.DialOptions{
				HTTPHeader: http.Header{"Authorization": {"Bearer " + env.ProviderToken}},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			fr := read(ctx, t, ws)
			if fr.Challenge == nil || len(fr.Challenge.Nonce) != protocol.NonceSize {
				t.Fatalf("first frame %+v; want a challenge with a %d-byte nonce", fr, protocol.NonceSize)
			}
			reg, _ := json.Marshal(protocol.Frame{Type: protocol.TypeRegister, Register: &protocol.Register{
				Version: protocol.Version, NodeKey: key.Public().(ed25519.PublicKey), Signature: tt.sign(fr.Challenge.Nonce),
				Engine: "test", Offers: []protocol.Offer{{Model: "m", MaxConcurrent: 1}},
			}})
			if err := ws.Write(ctx, websocket.MessageText, reg); err != nil {
				t.Fatal(err)
			}
			_, msg, err := ws.Read(ctx)
			var ce websocket.CloseError
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused == "":
				if !strings.Contains(string(msg), `"registered"`) {
					t.Errorf("answer %s; want registered", msg)
				}
			case !errors.As(err, &ce) || !strings.Contains(ce.Reason, tt.refused):
				t.Errorf("answer %s, %v; want the connection closed saying %q", msg, err, tt.refused)
			}
		})
	}
}

func read(ctx context.Context, t *testing.T, ws *websocket.Conn) protocol.Frame {
	t.Helper()
	_, msg, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fr protocol.Frame
	if err := json.Unmarshal(msg, &fr); err != nil {
		t.Fatal(err)
	}
	return fr
}

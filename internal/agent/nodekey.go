package agent

import (
	"crypto/ed25519"
	"fmt"
	"path/filepath"

	"github.com/shareai/shareai/internal/keyfile"
)

const nodeKeyFile = "node.key"

// LoadOrCreateNodeKey returns the node key kept in dir, making one on first run. The key is the
// node's identity: keep the data directory to keep the node's id and reputation.
func LoadOrCreateNodeKey(dir string) (ed25519.PrivateKey, error) {
	k, err := keyfile.LoadOrCreate(filepath.Join(dir, nodeKeyFile))
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	return k, nil
}

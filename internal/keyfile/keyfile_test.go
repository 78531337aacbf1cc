package keyfile_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/shareai/shareai/internal/keyfile"
)

func TestLoadOrCreate_MakesThenKeeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // does not exist yet
	path := filepath.Join(dir, "coordinator.key")
	k1, err := keyfile.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := keyfile.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equal(k2) {
		t.Error("the second call made a new key; want the one saved by the first")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "coordinator.key" {
		t.Errorf("the directory holds %v; want only coordinator.key (no temporary file left)", entries)
	}
	if runtime.GOOS == "windows" {
		return
	}
	for _, p := range []string{path, dir} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v; want no access for group and others", p, perm)
		}
	}
}

// A file that is there but holds no usable key is an error and stays as it was: replacing it
// would silently change the node's identity.
func TestLoadOrCreate_RefusesABadFile(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not PEM", []byte("hello\n")},
		{"PEM, not PKCS #8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("junk")})},
		{"an ECDSA key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "node.key")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if k, err := keyfile.LoadOrCreate(path); err == nil {
				t.Fatalf("LoadOrCreate = %d-byte key, nil error; want an error", len(k))
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(tt.data) {
				t.Errorf("the file was changed to %q; want it left as it was", got)
			}
		})
	}
}

// Package keyfile keeps an ed25519 private key in a file, made on first use: the provider
// agent's node key, and the key the coordinator countersigns receipts with. The file is PEM
// (PKCS #8), readable by its owner only.
//
// This package imports only the standard library.
package keyfile

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadOrCreate returns the key kept at path. When there is no file it makes a key and saves it
// there, creating the directory. A file that holds no ed25519 key is an error and is left as it
// is: a key is an identity, and a new one would be another.
func LoadOrCreate(path string) (ed25519.PrivateKey, error) {
	k, err := load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	_, k, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := save(path, k); err != nil {
		return nil, err
	}
	return k, nil
}

func load(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err // names the path, and wraps fs.ErrNotExist when there is no file
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: not PEM", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, not an ed25519 key", path, k)
	}
	return ek, nil
}

// save writes key to a temporary file beside path, syncs it and renames it into place, so that
// a crash never leaves half a key.
func save(path string, key ed25519.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create key directory: %w", err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*") // mode 0600
	if err != nil {
		return fmt.Errorf("save key: %w", err)
	}
	_, err = f.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("save key %s: %w", path, err)
	}
	return nil
}

package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"strings"
	"time"
)

// Secret prefixes by kind of key.
const (
	buyerPrefix    = "sk-"
	providerPrefix = "spt-"
)

var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a random identifier with a readable prefix, such as "acct_3kq…".
func NewID(prefix string) string {
	var b [10]byte
	rand.Read(b[:])
	return prefix + "_" + b32.EncodeToString(b[:])
}

// NewKey makes a key of a kind for an account. It returns the secret, which is shown once and
// never stored, and the record to store.
func NewKey(accountID, kind, name string, now time.Time) (secret string, k *Key) {
	var b [30]byte
	rand.Read(b[:])
	p := buyerPrefix
	if kind == KeyProvider {
		p = providerPrefix
	}
	secret = p + b32.EncodeToString(b[:])
	return secret, &Key{
		ID:        NewID("key"),
		AccountID: accountID,
		Kind:      kind,
		Name:      name,
		Prefix:    secret[:len(p)+8],
		Hash:      HashSecret(secret),
		CreatedAt: now,
	}
}

// HashSecret is how a key's secret is stored. Secrets are 150 random bits, so a fast hash is
// enough: there is nothing to brute-force.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// KindOfSecret tells which kind of key a secret looks like, or "" for neither.
func KindOfSecret(secret string) string {
	switch {
	case strings.HasPrefix(secret, buyerPrefix):
		return KeyBuyer
	case strings.HasPrefix(secret, providerPrefix):
		return KeyProvider
	}
	return ""
}

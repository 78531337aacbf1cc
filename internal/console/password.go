package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
	"golang.org/x/text/unicode/norm"
)

// Passwords are hashed with argon2id (RFC 9106) and stored in the PHC string format:
//
//	$argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>
//
// salt and hash in unpadded standard base64. The parameters are RFC 9106's second recommended
// option (section 4: 64 MiB of memory, 3 passes, 4 lanes), for machines that cannot spend
// 2 GiB on each log-in; they are above OWASP's minimums (19 MiB with 2 passes, or 46 MiB with
// one). Verification reads the parameters back from the stored string, so they can be raised
// without invalidating the hashes already stored.
const (
	argonMemory  = 64 * 1024 // KiB
	argonTime    = 3
	argonThreads = 4
	argonSaltLen = 16
	argonKeyLen  = 32
)

// argonParams are the parameters new hashes get: argonMemory, argonTime and argonThreads,
// except in this package's tests, which lower them to run fast.
var argonParams = struct {
	m, t uint32
	p    uint8
}{argonMemory, argonTime, argonThreads}

// Limits on passwords, counted in characters (runes), and in bytes for the longest.
const (
	minPasswordLen   = 10
	maxPasswordBytes = 1024
)

var (
	errPasswordShort = errors.New("password too short")
	errPasswordLong  = errors.New("password too long")
	errBadHash       = errors.New("not an argon2id PHC string")
)

// checkPassword says whether a new password is acceptable: at least minPasswordLen characters,
// at most maxPasswordBytes bytes.
func checkPassword(pw string) error {
	switch {
	case utf8.RuneCountInString(pw) < minPasswordLen:
		return errPasswordShort
	case len(pw) > maxPasswordBytes:
		return errPasswordLong
	}
	return nil
}

// hashSlots bounds the hashes computed at once: each takes argonMemory of memory and
// argonThreads cores, and log-in floods must not take the coordinator's memory with them.
var hashSlots = make(chan struct{}, 4)

// argon2id computes an argon2id key, waiting for a free slot.
func argon2id(ctx context.Context, pw string, salt []byte, t, m uint32, p uint8, n uint32) ([]byte, error) {
	select {
	case hashSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-hashSlots }()
	// NFKC, as NIST SP 800-63B advises, so that the same password typed on another keyboard or
	// system (composed or decomposed characters) still matches.
	return argon2.IDKey([]byte(norm.NFKC.String(pw)), salt, t, m, p, n), nil
}

// hashPassword hashes a password with a random salt and returns its PHC string.
func hashPassword(ctx context.Context, pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	a := argonParams
	key, err := argon2id(ctx, pw, salt, a.t, a.m, a.p, argonKeyLen)
	if err != nil {
		return "", err
	}
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, a.m, a.t, a.p,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// verifyPassword reports whether pw matches a PHC string made by hashPassword, with whatever
// parameters it was made. The comparison takes constant time.
func verifyPassword(ctx context.Context, phc, pw string) (bool, error) {
	h, err := parsePHC(phc)
	if err != nil {
		return false, err
	}
	if len(pw) > maxPasswordBytes {
		return false, nil // never stored: hashPassword's callers check the length first
	}
	key, err := argon2id(ctx, pw, h.salt, h.t, h.m, h.p, uint32(len(h.key)))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(key, h.key) == 1, nil
}

// phc is a parsed argon2id PHC string.
type phc struct {
	m, t      uint32
	p         uint8
	salt, key []byte
}

// parsePHC parses "$argon2id$v=19$m=…,t=…,p=…$salt$hash", refusing parameters so large that
// a corrupt row would take the machine down.
func parsePHC(s string) (*phc, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return nil, errBadHash
	}
	var h phc
	seen := 0
	for _, kv := range strings.Split(parts[3], ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if !ok || err != nil {
			return nil, errBadHash
		}
		switch k {
		case "m":
			h.m, seen = uint32(n), seen|1
		case "t":
			h.t, seen = uint32(n), seen|2
		case "p":
			if n > 255 {
				return nil, errBadHash
			}
			h.p, seen = uint8(n), seen|4
		default:
			return nil, errBadHash
		}
	}
	if seen != 7 || h.t < 1 || h.t > 64 || h.p < 1 || h.m < 8*uint32(h.p) || h.m > 4*1024*1024 {
		return nil, errBadHash
	}
	var err error
	b64 := base64.RawStdEncoding
	if h.salt, err = b64.DecodeString(parts[4]); err != nil || len(h.salt) < 8 {
		return nil, errBadHash
	}
	if h.key, err = b64.DecodeString(parts[5]); err != nil || len(h.key) < 16 || len(h.key) > 1024 {
		return nil, errBadHash
	}
	return &h, nil
}

// dummyHash is a hash of no one's password, verified when a log-in names an unknown email, so
// that the answer takes as long as for a known one and does not tell which emails have users.
var dummyHash = sync.OnceValue(func() string {
	var b [16]byte
	rand.Read(b[:])
	h, err := hashPassword(context.Background(), base64.RawStdEncoding.EncodeToString(b[:]))
	if err != nil {
		panic(err) // a background context is never done
	}
	return h
})

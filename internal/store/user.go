package store

import (
	"context"
	"time"

	"github.com/shareai/shareai/internal/money"
)

// Roles a console user may have. An account can be buyer and provider at once.
const (
	RoleBuyer    = "buyer"
	RoleProvider = "provider"
	RoleAdmin    = "admin"
)

// User is a person who logs in to the web console, on behalf of an account.
type User struct {
	ID           string // "usr_…"
	Email        string // unique, lower case
	PasswordHash string // argon2id, in the PHC string format
	AccountID    string
	Roles        []string
	Lang         string // preferred language ("en", "fa"); "" from the browser
	CreatedAt    time.Time
}

// Has reports whether the user has a role.
func (u *User) Has(role string) bool {
	for _, r := range u.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// WebSession is a logged-in browser. Only a hash of the cookie's secret is stored.
type WebSession struct {
	Hash      []byte // SHA-256 of the cookie's secret
	UserID    string
	CSRF      string // the token every form of this session carries
	CreatedAt time.Time
	ExpiresAt time.Time
}

// UsageDay sums an account's requests to one model on one UTC day.
type UsageDay struct {
	Day              time.Time
	Model            string
	Requests         int
	PromptTokens     int64
	CompletionTokens int64
	Cost             money.Nanos
}

// Users is what the console keeps: its users and their sessions.
type Users interface {
	// CreateUser stores a user; ErrConflict when the email is taken.
	CreateUser(ctx context.Context, u *User) error
	// UserByEmail and User find a user; ErrNotFound.
	UserByEmail(ctx context.Context, email string) (*User, error)
	User(ctx context.Context, id string) (*User, error)
	// SetUserRoles replaces a user's roles; ErrNotFound.
	SetUserRoles(ctx context.Context, id string, roles []string) error
	// CreateWebSession stores a session; WebSession finds one by hash (ErrNotFound, also once
	// expired at now); DeleteWebSession removes one (logging out).
	CreateWebSession(ctx context.Context, s *WebSession) error
	WebSession(ctx context.Context, hash []byte, now time.Time) (*WebSession, error)
	DeleteWebSession(ctx context.Context, hash []byte) error
	// UsageByDay sums an account's requests per UTC day and model since a time, oldest first.
	UsageByDay(ctx context.Context, accountID string, since time.Time) ([]UsageDay, error)
}

package testenv

import (
	"bytes"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// SecretPattern matches a whole API key or provider token. A log line may name a key by its
// prefix (sk-abcdefgh) or redacted (sk-abc****wxyz), never by its secret.
var SecretPattern = regexp.MustCompile(`\b(sk|spt)-[a-z2-7]{48}\b`)

// Logs is a test's logger that checks every line for secrets: records at warning level and
// above go to the test's log (every record with SHAREAI_TEST_LOG set), and every record,
// debug ones included (info and above in a benchmark), is formatted and searched for a whole key or token, or for any secret
// the test registers with Secret; the test fails on one.
type Logs struct {
	*slog.Logger
	t       testing.TB
	mu      sync.Mutex
	secrets []string
	lines   []string // every record, as JSON
}

// NewLogs returns a test's logger.
func NewLogs(t testing.TB) *Logs {
	l := &Logs{t: t}
	level := slog.LevelWarn
	if os.Getenv("SHAREAI_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	// A benchmark measures the network as it runs, logging at info level: a debug record per
	// request, formatted and scanned, is work a running coordinator does not do.
	scan := slog.LevelDebug
	if _, bench := t.(*testing.B); bench {
		scan = slog.LevelInfo
	}
	l.Logger = slog.New(slog.NewMultiHandler(
		slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}),
		slog.NewJSONHandler(scanner{l}, &slog.HandlerOptions{Level: scan}),
	))
	return l
}

// Secret registers secrets that must appear in no log line: passwords, session cookies,
// tokens of other shapes.
func (l *Logs) Secret(secrets ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range secrets {
		if s != "" {
			l.secrets = append(l.secrets, s)
		}
	}
}

// Lines returns the records logged so far, debug ones included, each as a line of JSON, that
// contain every one of substrings.
func (l *Logs) Lines(substrings ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []string
	for _, line := range l.lines {
		all := true
		for _, s := range substrings {
			all = all && strings.Contains(line, s)
		}
		if all {
			lines = append(lines, line)
		}
	}
	return lines
}

// scanner checks each formatted record.
type scanner struct{ l *Logs }

func (s scanner) Write(p []byte) (int, error) {
	l := s.l
	line := string(bytes.TrimSuffix(p, []byte("\n")))
	l.mu.Lock()
	l.lines = append(l.lines, line)
	var found []string
	if m := SecretPattern.FindString(line); m != "" {
		found = append(found, m[:6]+"…")
	}
	for _, secret := range l.secrets {
		if strings.Contains(line, secret) {
			found = append(found, secret[:min(len(secret), 4)]+"…")
		}
	}
	l.mu.Unlock()
	if len(found) > 0 {
		l.t.Errorf("a log line holds a secret (%s): %s", strings.Join(found, ", "), SecretPattern.ReplaceAllString(line, "$1-<secret>"))
	}
	return len(p), nil
}

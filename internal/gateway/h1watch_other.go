//go:build !linux

package gateway

// Elsewhere than on Linux each HTTP/1.1 stream's connection is watched by a goroutine of its
// own, blocked in a read (h1watch_linux.go polls them all with one).

// polled is empty: no poller.
type polled struct{}

// startWatch watches the stream's connection with watch, on a goroutine of its own.
func (s *h1Stream) startWatch() { go s.watch() }

// stopPolling reports that the stream's connection is in no poller.
func (s *h1Stream) stopPolling() bool { return false }

package queue

import "time"

// Config bounds the queue.
type Config struct {
	// Timeout is the longest a request waits for a slot; default DefaultTimeout. A request
	// never waits past its buyer's disconnect either.
	Timeout time.Duration
	// Length bounds the requests waiting for one model; default DefaultLength.
	Length int
	// PerKey bounds the requests one API key has waiting, for all models together, so that
	// one buyer cannot fill a model's queue; default DefaultPerKey.
	PerKey int
}

// Defaults of Config.
const (
	DefaultTimeout = 30 * time.Second
	DefaultLength  = 1024
	DefaultPerKey  = 256
)

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Length <= 0 {
		c.Length = DefaultLength
	}
	if c.PerKey <= 0 {
		c.PerKey = DefaultPerKey
	}
	c.PerKey = min(c.PerKey, c.Length)
	return c
}

// Package queue is where a request waits for a free slot when every node that fits it is busy.
package queue

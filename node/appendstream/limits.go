package appendstream

import (
	"time"

	"github.com/agentstate/agentstate/messages/errs"
)

// Defaults of Limits: what one AppendBatches stream may hold of a node.
const (
	// DefaultMaxAppends bounds the appends one stream has between their
	// receipt and the send of their outcome. Each is a worker goroutine
	// while it is served; a Go client has one stream per connection, so
	// this is the concurrency of one connection's callers (node bench
	// runs 8 connections).
	DefaultMaxAppends = 1024
	// DefaultMaxBytes bounds the encoded requests of those appends. The
	// Go client sends an append above 1 MiB alone on AppendStream, so a
	// batch stream's appends are small; one larger than the bound is
	// admitted alone, once nothing else of its stream is in flight.
	DefaultMaxBytes = 8 << 20
	// DefaultSendTimeout is how long one send of outcomes may stay
	// blocked (HTTP/2 flow control: the client does not read) before the
	// stream stops being served and ends.
	DefaultSendTimeout = 15 * time.Second
)

// Limits bound what one AppendBatches stream may hold of the node. Past
// MaxAppends or MaxBytes the server stops reading the stream, so HTTP/2
// flow control holds the client back; a client that does not read its
// outcomes for SendTimeout loses the stream. Zero fields take the
// defaults.
type Limits struct {
	MaxAppends  int
	MaxBytes    int64
	SendTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxAppends <= 0 {
		l.MaxAppends = DefaultMaxAppends
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.SendTimeout <= 0 {
		l.SendTimeout = DefaultSendTimeout
	}
	return l
}

// errStalled ends a stream whose client stopped reading its outcomes. The
// appends it took and did not answer may or may not have been stored, as
// for any stream that breaks: a retry with the same message ids is safe.
func errStalled(l Limits) error {
	return errs.ResourceExhausted("this stream's outcomes were not read for %v: the node stopped serving it; "+
		"appends it did not answer may have been stored, retry them with the same message ids on a stream that is read", l.SendTimeout)
}

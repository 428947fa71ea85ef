// Package lifecycletest holds what the tests of the actors built on
// lifecycle (sessions, plans) check alike: the answer of an activation
// that a newer one fenced, and that competing directories lose no
// acknowledged write.
package lifecycletest

import (
	"strings"
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
)

// IsFenced reports whether err is a fenced activation's answer: the
// kernel refuses its requests UNAVAILABLE, naming the newer activation
// that owns the entity, and stores nothing of them.
func IsFenced(err error) bool {
	return errs.CodeOf(err) == errs.UnavailableCode && strings.Contains(err.Error(), "newer activation")
}

// WantFenced fails the test unless err is a fenced activation's answer.
func WantFenced(tb testing.TB, err error) {
	tb.Helper()
	if !IsFenced(err) {
		tb.Fatalf("got %v, want UNAVAILABLE from a fenced actor", err)
	}
}

// Ack is a write a sender was answered: its id and the sequence the
// answer gave it.
type Ack struct {
	ID  string
	Seq int64
}

// WantAcksStored fails the test unless every sender's acknowledged
// writes (acks, by sender) are stored, by id, at the sequences their
// answers gave (stored), and unless a write was fenced at least once (the
// competing directories did compete). what names a write: "record",
// "message".
func WantAcksStored(tb testing.TB, what string, stored map[string]int64, acks [][]Ack, fenced int64) {
	tb.Helper()
	for g, mine := range acks {
		for _, a := range mine {
			if seq, ok := stored[a.ID]; !ok || seq != a.Seq {
				tb.Fatalf("sender %d: %s %s acknowledged at %d, stored at %d (%v)", g, what, a.ID, a.Seq, seq, ok)
			}
		}
	}
	if fenced == 0 {
		tb.Fatalf("no %s was fenced; the two services never competed", what)
	}
}

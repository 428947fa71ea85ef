// Package lifecycletest holds what the tests of the actors built on
// lifecycle (sessions, plans) check alike: the answer of an activation
// that a newer one fenced.
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

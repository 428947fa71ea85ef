// Package ids makes and checks agentstate identifiers: the ULIDs
// agentstate makes (sessions, messages, plan records, audit events), in
// their canonical 26-character Crockford base32 form, and plan ids, which
// the planning system makes.
package ids

import (
	"strings"
	"unicode/utf8"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/oklog/ulid/v2"
)

// New returns a new ULID string. ulid.Make is safe for concurrent use and
// monotonic within a millisecond.
func New() string { return ulid.Make().String() }

// Check returns an INVALID_ARGUMENT error naming field when s is not a
// canonical ULID (26 characters, upper-case Crockford base32).
func Check(field, s string) error {
	if s == "" {
		return errs.InvalidArgument("%s is empty; want a ULID", field)
	}
	id, err := ulid.ParseStrict(s)
	if err != nil || id.String() != strings.ToUpper(s) || s != strings.ToUpper(s) {
		return errs.InvalidArgument("%s %q is not a ULID (26 upper-case Crockford base32 characters)", field, clip(s))
	}
	return nil
}

// MaxPlanIDBytes bounds a plan id.
const MaxPlanIDBytes = 128

// CheckPlanID returns an INVALID_ARGUMENT error naming field unless s is a
// plan id: 1 to MaxPlanIDBytes bytes of [A-Za-z0-9._:-]. Plan ids are made
// by the planning system, not by agentstate, so any such id (ULIDs
// included) is one; every request that names a plan (the plan service,
// LinkPlan, an imported session's links, an audit record) is held to this
// one rule, so that a plan recorded through one is accepted by the others.
func CheckPlanID(field, s string) error {
	ok := s != "" && len(s) <= MaxPlanIDBytes
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
	}
	if !ok {
		return errs.InvalidArgument("%s %q is not a plan id (1 to %d bytes of [A-Za-z0-9._:-])", field, clip(s), MaxPlanIDBytes)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// MaxNamespaceBytes bounds a namespace name, as a session's.
const MaxNamespaceBytes = 256

// CheckNamespace returns an INVALID_ARGUMENT error naming field unless s
// can name a namespace as a session's namespace can: at most
// MaxNamespaceBytes bytes of UTF-8 without NUL. Empty is allowed: it is
// the default namespace.
func CheckNamespace(field, s string) error {
	switch {
	case len(s) > MaxNamespaceBytes:
		return errs.InvalidArgument("%s is %d bytes; at most %d", field, len(s), MaxNamespaceBytes)
	case !utf8.ValidString(s):
		return errs.InvalidArgument("%s is not valid UTF-8", field)
	case strings.IndexByte(s, 0) >= 0:
		return errs.InvalidArgument("%s contains a NUL byte", field)
	}
	return nil
}

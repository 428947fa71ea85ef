// Package ids makes and checks agentstate identifiers: ULIDs, in their
// canonical 26-character Crockford base32 form.
package ids

import (
	"strings"

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

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

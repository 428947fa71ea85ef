package persistence

import (
	"context"
	"unicode/utf8"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// Keyed items (issue 30): a message may carry an item key, unique among
// its session's stored messages, and a kind. Stores index both only where
// set (partial indexes), so messages without them cost nothing more. An
// append resolves its keys inside its transaction (ResolveKeys): a key
// held by a stored message either fails the turn or, for KeepStored,
// drops the new message in favour of the stored one; a key held by the
// message's own id is a retry, left to the message-id rules (CheckRetry).

const (
	// MaxItemKeyBytes bounds an item key (and a ListItems key prefix).
	MaxItemKeyBytes = 256
	// MaxKindBytes bounds a kind.
	MaxKindBytes = 64
)

// CheckItemKey accepts "" (no key) or 1-256 bytes of UTF-8 without NUL.
func CheckItemKey(field, key string) error {
	switch {
	case len(key) > MaxItemKeyBytes:
		return errs.InvalidArgument("%s is %d bytes; at most %d", field, len(key), MaxItemKeyBytes)
	case !utf8.ValidString(key):
		return errs.InvalidArgument("%s is not valid UTF-8", field)
	}
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return errs.InvalidArgument("%s contains a NUL byte", field)
		}
	}
	return nil
}

// CheckKind accepts 0-64 bytes of printable ASCII (0x20-0x7e).
func CheckKind(field, kind string) error {
	if len(kind) > MaxKindBytes {
		return errs.InvalidArgument("%s is %d bytes; at most %d", field, len(kind), MaxKindBytes)
	}
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; c < 0x20 || c > 0x7e {
			return errs.InvalidArgument("%s has byte 0x%02x at %d; printable ASCII only", field, c, i)
		}
	}
	return nil
}

// ItemKeyTaken refuses a turn whose message names an item key a stored
// message of another id holds: ALREADY_EXISTS naming the key.
func ItemKeyTaken(sessionID, key string) error {
	return errs.AlreadyExists("session %s: item key %q is stored already", sessionID, key)
}

// checkKeys is Turn.Check's part for keys: each key and kind valid, no key
// twice in the turn, KeepStored parallel to Messages.
func (t *Turn) checkKeys(sessionID string) error {
	if t.KeepStored != nil && len(t.KeepStored) != len(t.Messages) {
		return errs.InvalidArgument("session %s: %d keep-stored flags for %d messages", sessionID, len(t.KeepStored), len(t.Messages))
	}
	for i, m := range t.Messages {
		if err := CheckItemKey("item_key", m.GetItemKey()); err != nil {
			return Of("session", sessionID, err)
		}
		if err := CheckKind("kind", m.GetKind()); err != nil {
			return Of("session", sessionID, err)
		}
		if m.GetItemKey() == "" {
			continue
		}
		for _, o := range t.Messages[:i] {
			if o.GetItemKey() == m.GetItemKey() {
				return errs.InvalidArgument("session %s: item key %q appears twice in one turn", sessionID, m.GetItemKey())
			}
		}
	}
	return nil
}

// CheckImportKeys checks the item keys and kinds of the messages a
// session is created with (an import): well formed, and no key twice
// (INVALID_ARGUMENT; the import stores nothing).
func CheckImportKeys(sessionID string, ms []*sessionv1.Message) error {
	var seen map[string]struct{}
	for _, m := range ms {
		if err := CheckItemKey("item_key", m.GetItemKey()); err != nil {
			return Of("session", sessionID, err)
		}
		if err := CheckKind("kind", m.GetKind()); err != nil {
			return Of("session", sessionID, err)
		}
		k := m.GetItemKey()
		if k == "" {
			continue
		}
		if seen == nil {
			seen = make(map[string]struct{}, len(ms))
		}
		if _, dup := seen[k]; dup {
			return errs.InvalidArgument("session %s: item key %q appears twice among the imported messages", sessionID, k)
		}
		seen[k] = struct{}{}
	}
	return nil
}

// Keyed reports whether some message of the turn has an item key.
func (t *Turn) Keyed() bool {
	for _, m := range t.Messages {
		if m.GetItemKey() != "" {
			return true
		}
	}
	return false
}

// keepStored reports whether message i keeps a stored message of its key.
func (t *Turn) keepStored(i int) bool { return t.KeepStored != nil && t.KeepStored[i] }

// StoredKeys is a store's lookup, inside the append's transaction, of the
// session's stored messages holding any of keys, by key.
type StoredKeys func(sessionID string, keys []string) (map[string]*sessionv1.Message, error)

// KeyedTurn is a turn after ResolveKeys: Insert is what the store inserts
// (through its ordinary turn path), and Kept[i] the stored message that
// replaces message i of the original turn (nil where the message is
// inserted).
type KeyedTurn struct {
	Insert *Turn
	Kept   []*sessionv1.Message
}

// ResolveKeys decides t's keys against the stored ones (lookup): a turn
// error (ALREADY_EXISTS naming the key) when a message without KeepStored
// names a key a message of another id holds; else the turn to insert,
// without the KeepStored messages whose key is held. Those consume no
// sequence: the inserted ones stay dense. When Audit holds one entry per
// message (the session's per-message audit), a kept message's entry goes
// with it: nothing was appended. A turn without keys is returned as is,
// without a lookup.
func ResolveKeys(sessionID string, t *Turn, lookup StoredKeys) (KeyedTurn, error, error) {
	if !t.Keyed() {
		return KeyedTurn{Insert: t}, nil, nil
	}
	keys := make([]string, 0, len(t.Messages))
	for _, m := range t.Messages {
		if k := m.GetItemKey(); k != "" {
			keys = append(keys, k)
		}
	}
	stored, err := lookup(sessionID, keys)
	if err != nil {
		return KeyedTurn{}, nil, err
	}
	var kept []*sessionv1.Message
	for i, m := range t.Messages {
		s := stored[m.GetItemKey()]
		if m.GetItemKey() == "" || s == nil || s.GetMessageId() == m.GetMessageId() {
			continue
		}
		if !t.keepStored(i) {
			return KeyedTurn{}, ItemKeyTaken(sessionID, m.GetItemKey()), nil
		}
		if kept == nil {
			kept = make([]*sessionv1.Message, len(t.Messages))
		}
		kept[i] = s
	}
	if kept == nil {
		return KeyedTurn{Insert: t}, nil, nil
	}
	perMessage := len(t.Audit) == len(t.Messages)
	in := &Turn{State: t.State, Scopes: t.Scopes}
	if !perMessage {
		in.Audit = t.Audit
	}
	for i, m := range t.Messages {
		if kept[i] != nil {
			continue
		}
		in.Messages = append(in.Messages, m)
		if perMessage {
			in.Audit = append(in.Audit, t.Audit[i])
		}
	}
	return KeyedTurn{Insert: in, Kept: kept}, nil, nil
}

// AllKept reports whether nothing is left to store: every message was
// kept and the turn changes no state.
func (k KeyedTurn) AllKept() bool { return len(k.Insert.Messages) == 0 && !k.Insert.HasDelta() }

// Merge turns the result of inserting k.Insert into the original turn's:
// its messages in turn order, kept ones in their places, with Kept set.
func (k KeyedTurn) Merge(tr TurnResult) TurnResult {
	if k.Kept == nil || tr.Err != nil {
		return tr
	}
	out := TurnResult{Duplicate: tr.Duplicate, Messages: make([]*sessionv1.Message, len(k.Kept)), Kept: make([]bool, len(k.Kept))}
	j := 0
	for i, s := range k.Kept {
		if s != nil {
			out.Messages[i], out.Kept[i] = s, true
			continue
		}
		if j < len(tr.Messages) {
			out.Messages[i] = tr.Messages[j]
		}
		j++
	}
	return out
}

// ItemReader reads messages by item key and kind. Each read is indexed:
// its cost follows the page (and, for a key prefix, the keys under the
// prefix), not the session's history.
type ItemReader interface {
	// GetItem returns the session's message with the item key. NOT_FOUND
	// when none (or the session is staged or missing).
	GetItem(ctx context.Context, sessionID, itemKey string) (*sessionv1.Message, error)
	// ListItems returns a page of the session's messages (ItemFilter),
	// capped by MaxPageBytes as ListMessages is, and whether more may
	// follow (the limit or the cap left a matching message unread).
	ListItems(ctx context.Context, f ItemFilter) (page []*sessionv1.Message, more bool, err error)
}

// ItemFilter selects a session's messages: of Kind (""= any), whose item
// key starts with KeyPrefix ("" = any, unkeyed included), oldest first
// from sequence >= Cursor or, NewestFirst, newest first below Cursor
// (HasCursor false = from the start or the end), at most Limit
// (ClampLimit).
type ItemFilter struct {
	SessionID   string
	Kind        string
	KeyPrefix   string
	NewestFirst bool
	HasCursor   bool
	Cursor      int64
	Limit       int
}

// PrefixEnd is the smallest valid UTF-8 string greater than every valid
// UTF-8 string starting with prefix (itself valid UTF-8), for an index
// range [prefix, end) in byte order (which is code point order); ok is
// false when there is none (every rune is U+10FFFF) and the range is open
// above. It increments the last rune that can be, so that the bound stays
// valid text for stores that check it.
func PrefixEnd(prefix string) (end string, ok bool) {
	rs := []rune(prefix)
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i] + 1
		if r == 0xd800 { // skip the surrogates, which are not text
			r = 0xe000
		}
		if r <= utf8.MaxRune {
			rs[i] = r
			return string(rs[:i+1]), true
		}
	}
	return "", false
}

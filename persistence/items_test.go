package persistence_test

import (
	"testing"

	"github.com/agentstate/agentstate/persistence"
)

// PrefixEnd bounds a prefix range in byte order with valid text: the last
// rune that can grow grows (past the surrogates), and a prefix of U+10FFFF
// alone has no bound.
func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		prefix, end string
		ok          bool
	}{
		{"cp:", "cp;", true},
		{"a\u007f", "a\u0080", true},
		{"x\ud7ff", "x\ue000", true},
		{"é", "ê", true},
		{"a\U0010ffff", "b", true},
		{"\U0010ffff\U0010ffff", "", false},
	} {
		end, ok := persistence.PrefixEnd(c.prefix)
		if end != c.end || ok != c.ok {
			t.Errorf("PrefixEnd(%q) = %q, %v; want %q, %v", c.prefix, end, ok, c.end, c.ok)
		}
		if ok && !(c.prefix < end) {
			t.Errorf("PrefixEnd(%q) = %q is not above the prefix", c.prefix, end)
		}
	}
}

// Keys are 1-256 bytes of UTF-8 without NUL, kinds 0-64 bytes of printable
// ASCII.
func TestCheckItemKeyAndKind(t *testing.T) {
	for _, bad := range []string{string(make([]byte, 257)), "\xff", "a\x00b"} {
		if persistence.CheckItemKey("item_key", bad) == nil {
			t.Errorf("item key %q accepted", bad)
		}
	}
	for _, bad := range []string{"tab\t", "é", string(make([]byte, 65))} {
		if persistence.CheckKind("kind", bad) == nil {
			t.Errorf("kind %q accepted", bad)
		}
	}
	if persistence.CheckItemKey("item_key", "w:1:é") != nil || persistence.CheckKind("kind", "checkpoint ~!") != nil {
		t.Error("a good key or kind refused")
	}
}

package jsonobj_test

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/jsonobj"
)

func TestNormalize(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{"", "{}", false},
		{"{}", "{}", false},
		{` { "a" : 1, "b": [1, 2] } `, `{"a":1,"b":[1,2]}`, false},
		{`{"z":1,"a":2}`, `{"z":1,"a":2}`, false}, // key order kept
		{`[]`, "", true},
		{`null`, "", true},
		{`"x"`, "", true},
		{`12`, "", true},
		{`{"a":1} {}`, "", true},
		{`{"a":`, "", true},
		{"{\"a\":\"\xff\"}", "", true},
	}
	for _, c := range cases {
		got, err := jsonobj.Normalize("metadata_json", c.in)
		if c.bad {
			if !errors.Is(err, errs.ErrInvalidArgument) {
				t.Errorf("Normalize(%q) err = %v, want invalid argument", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// FuzzNormalize checks that Normalize accepts exactly the JSON objects and
// that its output is itself accepted unchanged and decodes to an object.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"", "{}", `{"a":1}`, `[1]`, `{"a":{"b":[null,true,"x"]}}`, `{"a":1}x`, "\xff", "null", " null "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := jsonobj.Normalize("f", s)
		if err != nil {
			if !errors.Is(err, errs.ErrInvalidArgument) {
				t.Fatalf("error of the wrong type: %v", err)
			}
			var v map[string]any
			// Invalid UTF-8 is refused on purpose, even where encoding/json
			// would accept it by substituting U+FFFD. JSON null decodes
			// into a map without error, as a nil map: not an object.
			if s != "" && utf8.ValidString(s) && json.Unmarshal([]byte(s), &v) == nil && v != nil && json.Valid([]byte(s)) && depthOf(t, s) <= jsonobj.MaxDepth {
				t.Fatalf("rejected a valid object %q: %v", s, err)
			}
			return
		}
		again, err := jsonobj.Normalize("f", got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, got, again, err)
		}
		if _, err := jsonobj.Decode(got); err != nil {
			t.Fatalf("normalized %q does not decode: %v", got, err)
		}
	})
}

package jsonobj_test

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/jsonobj"
)

// nested is an object nesting depth levels: {"a":{"a":...{}}}.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// depthOf is the nesting depth of valid JSON s, counted from encoding/json's
// tokens: the reference CheckDepth's byte scan must agree with.
func depthOf(t *testing.T, s string) int {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber() // a valid number too large for a float64 is still JSON
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest
		}
		if err != nil {
			t.Fatalf("depthOf(%q): %v", s, err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

func TestNormalizeDepth(t *testing.T) {
	atLimit := nested(jsonobj.MaxDepth)
	if got, err := jsonobj.Normalize("metadata_json", atLimit); err != nil || got != atLimit {
		t.Fatalf("an object nesting %d levels (the limit): %v", jsonobj.MaxDepth, err)
	}
	_, err := jsonobj.Normalize("metadata_json", nested(jsonobj.MaxDepth+1))
	if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), "metadata_json nests") ||
		!strings.Contains(err.Error(), "limit of 128 levels") {
		t.Fatalf("an object nesting %d levels: %v; want INVALID_ARGUMENT naming the limit", jsonobj.MaxDepth+1, err)
	}
	// Any depth is refused at the first level past the limit, whatever
	// follows (here: never closed).
	deep := `{"a":` + strings.Repeat("[", 1<<20)
	if _, err := jsonobj.Normalize("metadata_json", deep); !errors.Is(err, errs.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "(at byte 132)") {
		t.Fatalf("a megabyte of [: %v", err)
	}
}

func TestCheckDepth(t *testing.T) {
	cases := []struct {
		in    string
		depth int
	}{
		{`1`, 0},
		{`[]`, 1},
		{`{"a":[1,{"b":[]}]}`, 4},
		{`["[[[[", "}}"]`, 1},      // brackets inside strings do not count
		{`["\"[[[", {"a":[]}]`, 3}, // nor after an escaped quote
		{`["\\", [[]]]`, 3},        // an escaped backslash ends no string
		{`{"\u005b":[]}`, 2},
	}
	for _, c := range cases {
		if got := depthOf(t, c.in); got != c.depth {
			t.Fatalf("depthOf(%s) = %d; the case is wrong", c.in, got)
		}
		if err := jsonobj.CheckDepth("v", c.in, c.depth); err != nil {
			t.Errorf("CheckDepth(%s, %d): %v", c.in, c.depth, err)
		}
		if c.depth == 0 {
			continue
		}
		if err := jsonobj.CheckDepth("v", []byte(c.in), c.depth-1); !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("CheckDepth(%s, %d) = %v; want INVALID_ARGUMENT", c.in, c.depth-1, err)
		}
	}
}

// FuzzCheckDepth: on valid JSON the byte scan agrees with encoding/json's
// tokens; on anything it answers nil or INVALID_ARGUMENT.
func FuzzCheckDepth(f *testing.F) {
	for _, s := range []string{`{}`, `[[1],{"a":"[["}]`, `"\\"`, `["\"]"]`, `{"a":{"b":{"c":[]}}}`, `[[[`, `]]{`} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, s string, n uint8) {
		limit := int(n)
		err := jsonobj.CheckDepth("v", s, limit)
		if err != nil && !errors.Is(err, errs.ErrInvalidArgument) {
			t.Fatalf("error of the wrong type: %v", err)
		}
		if !json.Valid([]byte(s)) {
			return
		}
		if d := depthOf(t, s); (err == nil) != (d <= limit) {
			t.Fatalf("CheckDepth(%q, %d) = %v; its depth is %d", s, limit, err, d)
		}
	})
}

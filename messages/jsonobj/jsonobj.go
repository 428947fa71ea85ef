// Package jsonobj checks and normalizes the JSON-object fields of the
// contract (metadata_json, details_json, attributes_json).
package jsonobj

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/agentstate/agentstate/messages/errs"
)

// Normalize returns s as compact JSON when it is one JSON object, "{}" when
// s is empty, and an INVALID_ARGUMENT error naming field otherwise (not
// UTF-8, not JSON, not an object, trailing data, nested deeper than
// MaxDepth). Key order is kept.
func Normalize(field, s string) (string, error) {
	if s == "" {
		return "{}", nil
	}
	if !utf8.ValidString(s) {
		return "", errs.InvalidArgument("%s is not valid UTF-8", field)
	}
	if err := CheckDepth(field, s, MaxDepth); err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", errs.InvalidArgument("%s is not JSON: %v", field, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return "", errs.InvalidArgument("%s must be a JSON object, got %s", field, kind(v))
	}
	if dec.More() {
		return "", errs.InvalidArgument("%s has data after the JSON object", field)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return "", errs.InvalidArgument("%s is not JSON: %v", field, err)
	}
	return buf.String(), nil
}

// Decode parses a normalized object.
func Decode(s string) (map[string]any, error) {
	m := map[string]any{}
	if s == "" {
		return m, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, errs.InvalidArgument("not a JSON object: %v", err)
	}
	return m, nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

package jsonobj

import "github.com/agentstate/agentstate/messages/errs"

// MaxDepth bounds how deeply the arrays and objects of a caller's JSON may
// nest: metadata, details and attributes objects, state values, the export
// document and each line of an export file. A decoder recurses once per
// level (encoding/json's own bound is 10,000 levels, and a walk that keeps
// a path per level pays with the square of the depth), so a small document
// nesting deeply would cost far more than its size. 128 levels is far past
// what data nests in practice (MongoDB stops at 100) and keeps every walk
// of a value a few kilobytes of stack.
const MaxDepth = 128

// CheckDepth refuses s as INVALID_ARGUMENT naming field when its arrays and
// objects nest more than limit levels deep ({"a":[1]} nests 2). It reads s
// once, byte by byte, without allocating, and does not otherwise judge the
// syntax: run it before a decoder, which does. limit is MaxDepth for a
// value as the caller gives it, and more where a value sits inside a
// container of the caller's (a state object is one level around its values).
func CheckDepth[T ~string | ~[]byte](field string, s T, limit int) error {
	depth := 0
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return errs.InvalidArgument("%s nests arrays and objects deeper than the limit of %d levels (at byte %d)", field, limit, i)
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

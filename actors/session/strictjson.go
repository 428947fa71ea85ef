package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// decodeStrict decodes one JSON value, data, into v (a pointer to a struct
// of the export format) and refuses what encoding/json would let through
// silently: a key that appears twice in one object (encoding/json keeps the
// last), a key that matches a field only in another case ("MESSAGES"; its
// matching is case-insensitive) and a key no field has. Any of them makes
// the decoded value differ from what a reader of the text sees, so each is
// INVALID_ARGUMENT naming the key's path. The check walks the tokens
// against the struct's json tags before the decode proper.
//
// Arrays and objects nesting deeper than jsonobj.MaxDepth are refused
// first, by one pass over the bytes: the walk recurses once per level, so
// the bound keeps its cost (and the decode's) linear in len(data).
func decodeStrict(data []byte, v any) error {
	if err := jsonobj.CheckDepth("the JSON value", data, jsonobj.MaxDepth); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := strictWalk{dec: dec}
	if err := w.value(reflect.TypeOf(v)); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errs.InvalidArgument("content after the JSON value")
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errs.InvalidArgument("%v", err)
	}
	return nil
}

// strictWalk reads one value's tokens. path holds the key or index of
// each level entered; it is spelled out ($.session.messages[3]) only for
// an error, so that a level costs the same however deep it is.
type strictWalk struct {
	dec  *json.Decoder
	path []pathStep
}

// pathStep is an array's index, or when index is -1 an object's key.
type pathStep struct {
	key   string
	index int
}

func (w *strictWalk) errorf(format string, args ...any) error {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range w.path {
		if s.index < 0 {
			b.WriteString(".")
			b.WriteString(clip(s.key))
		} else {
			fmt.Fprintf(&b, "[%d]", s.index)
		}
	}
	return errs.InvalidArgument("at %s: %s", b.String(), fmt.Sprintf(format, args...))
}

// value reads one value; t is the Go type it will decode into, nil when
// none constrains its keys.
func (w *strictWalk) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(w.path) > jsonobj.MaxDepth {
		// decodeStrict's check of the bytes refuses this first.
		return w.errorf("nested deeper than %d levels", jsonobj.MaxDepth)
	}
	tok, err := w.dec.Token()
	if err != nil {
		return w.errorf("%v", err)
	}
	switch tok {
	case json.Delim('{'):
		return w.object(t)
	case json.Delim('['):
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			w.path = append(w.path, pathStep{index: i})
			if err := w.value(et); err != nil {
				return err
			}
			w.path = w.path[:len(w.path)-1]
		}
		return w.end()
	}
	return nil
}

func (w *strictWalk) object(t reflect.Type) error {
	var fields map[string]reflect.Type
	if t != nil && t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	}
	seen := map[string]bool{}
	for w.dec.More() {
		kt, err := w.dec.Token()
		if err != nil {
			return w.errorf("%v", err)
		}
		key, _ := kt.(string)
		if seen[key] {
			return w.errorf("key %q appears twice", clip(key))
		}
		seen[key] = true
		var ft reflect.Type
		if fields != nil {
			var ok bool
			if ft, ok = fields[key]; !ok {
				return w.errorf("unknown field %q (%s)", clip(key), knownFields(fields))
			}
		} else if t != nil && t.Kind() == reflect.Map {
			ft = t.Elem()
		}
		w.path = append(w.path, pathStep{key: key, index: -1})
		if err := w.value(ft); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
	return w.end()
}

// end reads the closing delimiter of the array or object being read.
func (w *strictWalk) end() error {
	if _, err := w.dec.Token(); err != nil {
		return w.errorf("%v", err)
	}
	return nil
}

// jsonFields maps a struct's JSON keys, exactly as its tags spell them, to
// the fields' types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func knownFields(fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	return "known, case-sensitive: " + strings.Join(names, ", ")
}

// checkKnownFields refuses a protobuf message of an import that carries
// fields this node does not know, at any depth: the checksum covers only
// the fields it knows, so anything else would be imported unchecked or
// silently dropped — the protobuf form of an unknown JSON key.
func checkKnownFields(m protoreflect.Message, path string) error {
	if len(m.GetUnknown()) > 0 {
		return errs.InvalidArgument("%s has fields this node does not know", path)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil || fd.IsMap():
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = checkKnownFields(l.Get(i).Message(), fmt.Sprintf("%s.%s[%d]", path, fd.Name(), i))
			}
		default:
			err = checkKnownFields(v.Message(), path+"."+string(fd.Name()))
		}
		return err == nil
	})
	return err
}

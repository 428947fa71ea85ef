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
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walkStrict(dec, reflect.TypeOf(v), "$"); err != nil {
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

// walkStrict reads one value from dec; t is the Go type it will decode
// into, nil when none constrains its keys.
func walkStrict(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return errs.InvalidArgument("at %s: %v", path, err)
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errs.InvalidArgument("at %s: %v", path, err)
			}
			key, _ := kt.(string)
			if seen[key] {
				return errs.InvalidArgument("at %s: key %q appears twice", path, clip(key))
			}
			seen[key] = true
			var ft reflect.Type
			if fields != nil {
				var ok bool
				if ft, ok = fields[key]; !ok {
					return errs.InvalidArgument("at %s: unknown field %q (%s)", path, clip(key), knownFields(fields))
				}
			} else if t != nil && t.Kind() == reflect.Map {
				ft = t.Elem()
			}
			if err := walkStrict(dec, ft, path+"."+key); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	case json.Delim('['):
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkStrict(dec, et, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
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

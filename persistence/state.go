package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"google.golang.org/grpc/status"
)

// Session state and shared scopes (issue 18): a state is a JSON object,
// changed by deltas (sessionv1.StateDelta). The session's own state is
// applied by its owner's command (the owner knows the state it committed);
// a shared scope's deltas are applied by the writer inside the
// transaction, so concurrent writers of one scope apply in commit order.
// ApplyDelta is the one function both use, so a state replayed from the
// deltas equals the stored one.

// Bounds of one state (session or scope). They keep a state's rewrite on
// every delta, and its read, small enough to stay O(1) per call.
const (
	MaxStateBytes    = 256 << 10
	MaxStateKeys     = 1024
	MaxStateKeyBytes = 256
	MaxScopeBytes    = 256
	// TempPrefix marks invocation-only keys (ADK's "temp:"): they are
	// dropped from every delta and never stored.
	TempPrefix = "temp:"
)

// EmptyState is the state of a session or scope never written.
const EmptyState = "{}"

// NormalizeDelta validates d and returns its normal form: temp: keys
// dropped, values compacted JSON; nil when nothing is left. Errors are
// INVALID_ARGUMENT naming field.
func NormalizeDelta(field string, d *sessionv1.StateDelta) (*sessionv1.StateDelta, error) {
	if d == nil || (len(d.GetSetJson()) == 0 && len(d.GetDelete()) == 0) {
		return nil, nil
	}
	if len(d.GetSetJson())+len(d.GetDelete()) > MaxStateKeys {
		return nil, errs.InvalidArgument("%s names %d keys; at most %d", field, len(d.GetSetJson())+len(d.GetDelete()), MaxStateKeys)
	}
	out := &sessionv1.StateDelta{}
	size := 0
	for k, v := range d.GetSetJson() {
		if err := checkKey(field, k); err != nil {
			return nil, err
		}
		if strings.HasPrefix(k, TempPrefix) {
			continue
		}
		size += len(k) + len(v)
		if size > MaxStateBytes {
			return nil, errs.InvalidArgument("%s is larger than a state may be (%d bytes)", field, MaxStateBytes)
		}
		// A value nests as every caller's JSON may (jsonobj.MaxDepth), so
		// a state nests at most one level more.
		if err := jsonobj.CheckDepth("the value", v, jsonobj.MaxDepth); err != nil {
			return nil, errs.InvalidArgument("%s.set_json[%q]: %s", field, k, errs.From(err).Msg)
		}
		c, err := compactJSON(v)
		if err != nil {
			return nil, errs.InvalidArgument("%s.set_json[%q] is not JSON: %v", field, k, err)
		}
		if out.SetJson == nil {
			out.SetJson = make(map[string]string, len(d.GetSetJson()))
		}
		out.SetJson[k] = c
	}
	for _, k := range d.GetDelete() {
		if err := checkKey(field, k); err != nil {
			return nil, err
		}
		if strings.HasPrefix(k, TempPrefix) {
			continue
		}
		out.Delete = append(out.Delete, k)
	}
	if len(out.SetJson) == 0 && len(out.Delete) == 0 {
		return nil, nil
	}
	return out, nil
}

func checkKey(field, k string) error {
	if k == "" || len(k) > MaxStateKeyBytes || !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 {
		return errs.InvalidArgument("%s: key %.40q must be 1-%d bytes of UTF-8 without NUL", field, k, MaxStateKeyBytes)
	}
	return nil
}

// CheckScope validates a shared scope's name.
func CheckScope(field, name string) error {
	if name == "" || len(name) > MaxScopeBytes || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
		return errs.InvalidArgument("%s %.40q must be 1-%d bytes of UTF-8 without NUL", field, name, MaxScopeBytes)
	}
	return nil
}

func compactJSON(v string) (string, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(v)); err != nil {
		return "", err
	}
	if !json.Valid(b.Bytes()) {
		return "", errors.New("more than one JSON value")
	}
	return b.String(), nil
}

// ApplyDelta returns state (a JSON object; "" is "{}") with d applied: its
// sets, then its deletes. The result's keys are sorted (encoding/json
// orders map keys), so equal states are equal strings. A result past
// MaxStateBytes or MaxStateKeys is INVALID_ARGUMENT naming what.
func ApplyDelta(what, state string, d *sessionv1.StateDelta) (string, error) {
	return applyDelta(what, state, d, MaxStateKeys, func(n int) error {
		return errs.InvalidArgument("%s: the state would have %d keys; at most %d", what, n, MaxStateKeys)
	})
}

// applyDelta is ApplyDelta with tooMany the error of a result of n keys,
// past maxKeys (at most MaxStateKeys).
func applyDelta(what, state string, d *sessionv1.StateDelta, maxKeys int, tooMany func(n int) error) (string, error) {
	if d == nil || (len(d.GetSetJson()) == 0 && len(d.GetDelete()) == 0) {
		if state == "" {
			return EmptyState, nil
		}
		return state, nil
	}
	m := map[string]json.RawMessage{}
	if state != "" && state != EmptyState {
		if err := json.Unmarshal([]byte(state), &m); err != nil {
			return "", errs.Internal("%s: the stored state is not a JSON object: %v", what, err)
		}
	}
	for k, v := range d.GetSetJson() {
		m[k] = json.RawMessage(v)
	}
	for _, k := range d.GetDelete() {
		delete(m, k)
	}
	if len(m) > maxKeys {
		return "", tooMany(len(m))
	}
	// Without HTML escaping: values are stored as the client wrote them
	// (compacted), not rewritten to \u003c.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return "", errs.InvalidArgument("%s: a state value is not JSON: %v", what, err)
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if len(out) > MaxStateBytes {
		return "", errs.InvalidArgument("%s: the state would be %d bytes; at most %d", what, len(out), MaxStateBytes)
	}
	return string(out), nil
}

// ScopeDelta is one shared scope's change, as a command carries it.
type ScopeDelta struct {
	Scope string
	Delta *sessionv1.StateDelta
}

// SequenceMismatchError refuses a conditional write whose expected next
// sequence is not the session's. Nothing of the write was stored. It wraps
// a FAILED_PRECONDITION *errs.Error; over gRPC it carries a
// sessionv1.SequenceMismatch detail as well.
type SequenceMismatchError struct {
	SessionID string
	Expected  int64
	Next      int64
}

func (e *SequenceMismatchError) Error() string { return e.Unwrap().Error() }

// Unwrap returns the FAILED_PRECONDITION error. Its message ends in "next
// sequence is N" so transports that carry only the common Error (streams,
// the remote endpoint) still carry the number (NextSequenceOf reads it).
func (e *SequenceMismatchError) Unwrap() error {
	return errs.FailedPrecondition("session %s: expected next sequence %d, but the next sequence is %d", e.SessionID, e.Expected, e.Next)
}

// GRPCStatus is the FAILED_PRECONDITION status with both details.
func (e *SequenceMismatchError) GRPCStatus() *status.Status {
	st := errs.From(e.Unwrap()).GRPCStatus()
	if d, err := st.WithDetails(&sessionv1.SequenceMismatch{SessionId: e.SessionID, ExpectedNextSequence: e.Expected, NextSequence: e.Next}); err == nil {
		return d
	}
	return st
}

// NextSequenceOf returns the current next sequence a refused conditional
// write reported: from a *SequenceMismatchError, a gRPC status carrying a
// SequenceMismatch detail, or the message of a FAILED_PRECONDITION that
// crossed a transport carrying only the common Error.
func NextSequenceOf(err error) (int64, bool) {
	var sm *SequenceMismatchError
	if errors.As(err, &sm) {
		return sm.Next, true
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if m, ok := d.(*sessionv1.SequenceMismatch); ok {
				return m.GetNextSequence(), true
			}
		}
	}
	if errs.CodeOf(err) != errs.FailedPreconditionCode {
		return 0, false
	}
	msg := errs.From(err).Msg
	const marker = "but the next sequence is "
	i := strings.LastIndex(msg, marker)
	if i < 0 {
		return 0, false
	}
	var n int64
	if _, err := fmt.Sscanf(msg[i+len(marker):], "%d", &n); err != nil {
		return 0, false
	}
	return n, true
}

package plan

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/jsonobj"
)

// The keys of error_details that belong to the plan actor: it writes them
// on every recorded error and nothing else may. Every other top-level key
// belongs to other writers (MergeErrorDetails) and the plan actor never
// touches it, so neither side can clobber the other.
var recoveryKeys = []string{
	"error_category", "error_phase", "retry_count", "max_retries",
	"is_retriable", "recovery_action", "recovery_hint", "recovery_command",
}

func isRecoveryKey(k string) bool {
	for _, r := range recoveryKeys {
		if k == r {
			return true
		}
	}
	return false
}

// recoveryJSON is the stored form of the recovery keys.
type recoveryJSON struct {
	ErrorCategory   string `json:"error_category"`
	ErrorPhase      string `json:"error_phase"`
	RetryCount      int32  `json:"retry_count"`
	MaxRetries      int32  `json:"max_retries"`
	IsRetriable     bool   `json:"is_retriable"`
	RecoveryAction  string `json:"recovery_action"`
	RecoveryHint    string `json:"recovery_hint"`
	RecoveryCommand string `json:"recovery_command"`
}

// CategoryName is the lower-case name of c used in error_details and
// audit entries ("transient", "merge_conflict").
func CategoryName(c planv1.ErrorCategory) string {
	return enumName(c.String(), "ERROR_CATEGORY_")
}

// PhaseName is the lower-case name of p ("execute").
func PhaseName(p planv1.Phase) string { return enumName(p.String(), "PHASE_") }

// ActionName is the lower-case name of a ("revert_to_strategize").
func ActionName(a planv1.RecoveryAction) string { return enumName(a.String(), "RECOVERY_ACTION_") }

func enumName(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }

func enumValue(values map[string]int32, prefix, name string) int32 {
	return values[prefix+strings.ToUpper(name)] // unknown names give 0, UNSPECIFIED
}

// splitDetails separates a stored error_details object into the other
// writers' keys (raw values) and the recovery summary (nil when the object
// has no recovery keys).
func splitDetails(s string) (map[string]json.RawMessage, *planv1.ErrorDetails, error) {
	foreign := map[string]json.RawMessage{}
	if s == "" {
		return foreign, nil, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &all); err != nil {
		return nil, nil, errs.Internal("stored error_details is not a JSON object: %v", err)
	}
	rec := map[string]json.RawMessage{}
	for k, v := range all {
		if isRecoveryKey(k) {
			rec[k] = v
		} else {
			foreign[k] = v
		}
	}
	if len(rec) == 0 {
		return foreign, nil, nil
	}
	raw, _ := json.Marshal(rec)
	var r recoveryJSON
	// Lenient: a value of the wrong type is left at its zero value, so
	// one odd key cannot make the plan unloadable.
	_ = json.Unmarshal(raw, &r)
	return foreign, &planv1.ErrorDetails{
		ErrorCategory:   planv1.ErrorCategory(enumValue(planv1.ErrorCategory_value, "ERROR_CATEGORY_", r.ErrorCategory)),
		ErrorPhase:      planv1.Phase(enumValue(planv1.Phase_value, "PHASE_", r.ErrorPhase)),
		RetryCount:      r.RetryCount,
		MaxRetries:      r.MaxRetries,
		IsRetriable:     r.IsRetriable,
		RecoveryAction:  planv1.RecoveryAction(enumValue(planv1.RecoveryAction_value, "RECOVERY_ACTION_", r.RecoveryAction)),
		RecoveryHint:    r.RecoveryHint,
		RecoveryCommand: r.RecoveryCommand,
	}, nil
}

// joinDetails renders the whole error_details object: the other writers'
// keys and, when set, the recovery keys. Keys are sorted, so equal states
// give equal strings. Foreign values are compact JSON already (they come
// from a normalized payload or from a stored object this function wrote).
func joinDetails(foreign map[string]json.RawMessage, rec *planv1.ErrorDetails) string {
	keys := make([]string, 0, len(foreign)+len(recoveryKeys))
	for k := range foreign {
		keys = append(keys, k)
	}
	if rec != nil {
		keys = append(keys, recoveryKeys...)
	}
	sort.Strings(keys)
	buf := make([]byte, 0, 256+64*len(foreign))
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, k)
		buf = append(buf, ':')
		if v, ok := foreign[k]; ok {
			buf = append(buf, v...)
		} else {
			buf = appendRecovery(buf, k, rec)
		}
	}
	return string(append(buf, '}'))
}

// foreignBytes is the exact size of joinDetails(merged, nil), merged being
// foreign with add's keys added or replaced: the bytes the other writers'
// keys take when stored. Keys count as rendered (escapes included), so a
// key of control characters costs what it stores, not what it decodes to.
func foreignBytes(foreign, add map[string]json.RawMessage) int {
	size, n := 2, 0 // the braces
	count := func(k string, v json.RawMessage) {
		size += len(appendString(nil, k)) + 1 + len(v) // "key":value
		n++
	}
	for k, v := range foreign {
		if _, replaced := add[k]; !replaced {
			count(k, v)
		}
	}
	for k, v := range add {
		count(k, v)
	}
	if n > 1 {
		size += n - 1 // the commas
	}
	return size
}

func appendRecovery(buf []byte, key string, rec *planv1.ErrorDetails) []byte {
	switch key {
	case "error_category":
		return appendString(buf, CategoryName(rec.GetErrorCategory()))
	case "error_phase":
		return appendString(buf, PhaseName(rec.GetErrorPhase()))
	case "retry_count":
		return strconv.AppendInt(buf, int64(rec.GetRetryCount()), 10)
	case "max_retries":
		return strconv.AppendInt(buf, int64(rec.GetMaxRetries()), 10)
	case "is_retriable":
		return strconv.AppendBool(buf, rec.GetIsRetriable())
	case "recovery_action":
		return appendString(buf, ActionName(rec.GetRecoveryAction()))
	case "recovery_hint":
		return appendString(buf, rec.GetRecoveryHint())
	default: // recovery_command
		return appendString(buf, rec.GetRecoveryCommand())
	}
}

// appendString appends s as a JSON string. s is valid UTF-8 (validated
// input, or decoded JSON), so only quotes, backslashes and control
// characters need escaping.
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// parseForeign validates a MergeErrorDetails payload: a JSON object of at
// most maxBytes without recovery keys. It returns the top-level keys.
func parseForeign(s string, maxBytes int) (map[string]json.RawMessage, error) {
	if err := checkText("details_json", s, maxBytes); err != nil {
		return nil, err
	}
	norm, err := jsonobj.Normalize("details_json", s)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader([]byte(norm)))
	if err := dec.Decode(&m); err != nil {
		return nil, errs.InvalidArgument("details_json is not a JSON object: %v", err)
	}
	for k := range m {
		if isRecoveryKey(k) {
			return nil, errs.InvalidArgument("details_json key %q belongs to the plan's error recovery and cannot be merged", k)
		}
	}
	return m, nil
}

package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
)

// Masked replaces the value of every secret key in details.
const Masked = "***"

// secretSuffixes and secretNames decide which keys hold secrets. A key is
// compared lower-cased with '-', '_', '.' and ' ' removed, so "API-Key",
// "api_key" and "apiKey" are the same key. Suffixes catch "db_password",
// "client_secret" and "github_token"; "prompt_tokens" (a count, not a
// secret) does not end in "token" and stays.
var (
	secretSuffixes = []string{
		"password", "passwd", "passphrase", "secret", "token", "apikey",
		"authorization", "privatekey", "credential", "credentials",
	}
	secretNames = map[string]bool{
		"pwd": true, "auth": true, "cookie": true, "setcookie": true,
	}
	// hints is a cheap pre-filter: a details object none of whose
	// lower-cased text contains one of these has no secret key. It holds
	// only for text without escapes: a key is secret by what it decodes
	// to, and "\u0070assword" spells none of them (see maskSecrets).
	hints = []string{"pass", "pwd", "secret", "token", "key", "auth", "cookie", "credential"}
)

// IsSecretKey reports whether the value under key is masked.
func IsSecretKey(key string) bool {
	k := strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', '.', ' ':
			return -1
		}
		return r
	}, strings.ToLower(key))
	if secretNames[k] {
		return true
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(k, s) {
			return true
		}
	}
	return false
}

// maskSecrets returns obj (a compact JSON object, as jsonobj.Normalize
// makes it) with the value of every secret key, at any depth and inside
// arrays, replaced by the string Masked. Key order is kept. Keys are
// judged decoded, so an escaped key ("\u0070assword") is masked like its
// plain spelling. An object in which nothing is masked is returned as
// it came, byte for byte.
func maskSecrets(obj string) (string, error) {
	lower := strings.ToLower(obj)
	// Any backslash may hide a hint inside an escape: decode the whole
	// object then, rather than trust the raw text.
	found := strings.IndexByte(obj, '\\') >= 0
	for _, h := range hints {
		if found || strings.Contains(lower, h) {
			found = true
			break
		}
	}
	if !found {
		return obj, nil
	}
	dec := json.NewDecoder(strings.NewReader(obj))
	dec.UseNumber()
	m := masker{dec: dec}
	if err := m.value(false); err != nil {
		return "", err
	}
	if !m.masked {
		return obj, nil
	}
	return m.out.String(), nil
}

type masker struct {
	dec    *json.Decoder
	out    bytes.Buffer
	masked bool // some value was replaced: out differs from the input
}

// value copies the next JSON value to out, or skips it and writes Masked
// when mask is set.
func (m *masker) value(mask bool) error {
	tok, err := m.dec.Token()
	if err != nil {
		return err
	}
	if mask {
		m.masked = true
		if _, ok := tok.(json.Delim); ok {
			if err := m.skip(); err != nil {
				return err
			}
		}
		m.str(Masked)
		return nil
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return m.object()
		case '[':
			return m.array()
		}
		return io.ErrUnexpectedEOF
	case string:
		m.str(t)
	case json.Number:
		m.out.WriteString(string(t))
	case bool:
		if t {
			m.out.WriteString("true")
		} else {
			m.out.WriteString("false")
		}
	case nil:
		m.out.WriteString("null")
	}
	return nil
}

func (m *masker) object() error {
	m.out.WriteByte('{')
	for i := 0; m.dec.More(); i++ {
		if i > 0 {
			m.out.WriteByte(',')
		}
		tok, err := m.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		m.str(key)
		m.out.WriteByte(':')
		if err := m.value(IsSecretKey(key)); err != nil {
			return err
		}
	}
	_, err := m.dec.Token() // '}'
	m.out.WriteByte('}')
	return err
}

func (m *masker) array() error {
	m.out.WriteByte('[')
	for i := 0; m.dec.More(); i++ {
		if i > 0 {
			m.out.WriteByte(',')
		}
		if err := m.value(false); err != nil {
			return err
		}
	}
	_, err := m.dec.Token() // ']'
	m.out.WriteByte(']')
	return err
}

// skip consumes the rest of a container whose opening delimiter was read.
func (m *masker) skip() error {
	depth := 1
	for depth > 0 {
		tok, err := m.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

func (m *masker) str(s string) {
	b, _ := json.Marshal(s) // a Go string always marshals
	m.out.Write(b)
}

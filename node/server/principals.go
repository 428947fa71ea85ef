package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentstate/agentstate/messages/principal"
	"github.com/agentstate/agentstate/node/client"
)

// role is what a principal may do in a namespace; each includes the ones
// before it.
type role int

const (
	roleNone role = iota
	roleReader
	roleWriter
	roleAdmin
)

func (r role) String() string {
	switch r {
	case roleReader:
		return "reader"
	case roleWriter:
		return "writer"
	case roleAdmin:
		return "admin"
	}
	return "no role"
}

func parseRole(s string) (role, bool) {
	switch s {
	case "reader":
		return roleReader, true
	case "writer":
		return roleWriter, true
	case "admin":
		return roleAdmin, true
	}
	return roleNone, false
}

// grant is a role on the namespaces a pattern matches: a name, a prefix
// ending in "*" ("team-*"), or "*" (every namespace).
type grant struct {
	pattern string
	role    role
}

func (g grant) matches(ns string) bool {
	if p, ok := strings.CutSuffix(g.pattern, "*"); ok {
		return strings.HasPrefix(ns, p)
	}
	return g.pattern == ns
}

// Principal is who a request authenticated as: a name, its roles per
// namespace and whether it is the node's operator. Immutable once built,
// so a reload swaps whole principals and a request keeps the one it
// authenticated with.
type Principal struct {
	Name     string
	operator bool
	grants   []grant
	// everywhere is the role held on every namespace (a "*" grant): a
	// request that needs no more is decided without reading the store.
	everywhere role
}

// role is the highest role p holds on ns.
func (p *Principal) role(ns string) role {
	r := p.everywhere
	for _, g := range p.grants {
		if g.role > r && g.matches(ns) {
			r = g.role
		}
	}
	return r
}

// only is the one namespace p may read, when its grants name exactly one
// by its full name (no pattern): a list can then ask the store for it.
func (p *Principal) only() (string, bool) {
	if p.everywhere != roleNone || len(p.grants) != 1 || strings.HasSuffix(p.grants[0].pattern, "*") {
		return "", false
	}
	return p.grants[0].pattern, true
}

// identities are the principals a node knows, indexed by credential.
type identities struct {
	byToken map[[sha256.Size]byte]*Principal
	byURI   map[string]*Principal
	byDNS   map[string]*Principal
	// needsClientCerts: some principal authenticates by certificate.
	needsClientCerts bool
	// jwt, when set, authenticates bearer credentials that are JWTs.
	jwt *jwtVerifier
	// quotas are the namespaces' quotas (nil: the defaults), which the
	// store enforces (quotas.go).
	quotas *namespaceQuotas
}

// tokenIdentities is --auth-token-file: one principal, "token", with every
// grant.
func tokenIdentities(token string) *identities {
	p := &Principal{Name: "token", operator: true, everywhere: roleAdmin}
	return &identities{byToken: map[[sha256.Size]byte]*Principal{sha256.Sum256([]byte(token)): p}}
}

// byCert finds the principal of a verified client certificate: its URI
// SANs (SPIFFE ids) first, then its DNS SANs.
func (ids *identities) byCert(c *x509.Certificate) *Principal {
	for _, u := range c.URIs {
		if p := ids.byURI[u.String()]; p != nil {
			return p
		}
	}
	for _, d := range c.DNSNames {
		if p := ids.byDNS[strings.ToLower(d)]; p != nil {
			return p
		}
	}
	return nil
}

// identitiesFile is the --auth-file format (docs/OPERATIONS.md, Tenants).
type identitiesFile struct {
	Principals []principalSpec `json:"principals"`
	JWT        *jwtSpec        `json:"jwt"`
	Quotas     []quotaSpec     `json:"quotas"`
}

type principalSpec struct {
	Name string `json:"name"`
	// TokenSHA256 are hex SHA-256 digests of the principal's bearer
	// tokens; several, so that a token is rotated without downtime.
	TokenSHA256 []string    `json:"token_sha256"`
	URISANs     []string    `json:"uri_sans"`
	DNSSANs     []string    `json:"dns_sans"`
	Operator    bool        `json:"operator"`
	Grants      []grantSpec `json:"grants"`
}

type grantSpec struct {
	Namespace string `json:"namespace"`
	Role      string `json:"role"`
}

// loadIdentities reads and checks an --auth-file. Any mistake is an error
// naming the principal and the field: a file half understood would grant
// what its author did not mean.
func loadIdentities(path string) (*identities, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--auth-file: %w", err)
	}
	ids, err := parseIdentitiesIn(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("--auth-file %s: %w", path, err)
	}
	return ids, nil
}

func parseIdentities(b []byte) (*identities, error) { return parseIdentitiesIn(b, ".") }

// parseIdentitiesIn parses an identities file of directory dir (where a
// relative jwks_file is).
func parseIdentitiesIn(b []byte, dir string) (*identities, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f identitiesFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not an identities file (JSON): %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("text after the identities object")
	}
	if len(f.Principals) == 0 && (f.JWT == nil || f.JWT.GrantsClaim == "") {
		return nil, fmt.Errorf("no principals")
	}
	quotas, err := parseQuotas(f.Quotas)
	if err != nil {
		return nil, err
	}
	ids := &identities{byToken: map[[sha256.Size]byte]*Principal{}, byURI: map[string]*Principal{}, byDNS: map[string]*Principal{},
		quotas: quotas}
	byName := map[string]*Principal{}
	for i, s := range f.Principals {
		if s.Name == "" {
			return nil, fmt.Errorf("principals[%d] has no name", i)
		}
		if byName[s.Name] != nil {
			return nil, fmt.Errorf("principal %q appears twice", s.Name)
		}
		if principal.Reserved(s.Name) {
			return nil, fmt.Errorf("principal %q: the name is reserved for the audit trail's own principals", s.Name)
		}
		p, err := s.principal()
		if err != nil {
			return nil, fmt.Errorf("principal %q: %w", s.Name, err)
		}
		if len(s.TokenSHA256)+len(s.URISANs)+len(s.DNSSANs) == 0 && f.JWT == nil {
			return nil, fmt.Errorf("principal %q has no credential (token_sha256, uri_sans or dns_sans; or a \"jwt\" section naming it)", s.Name)
		}
		byName[s.Name] = p
		for _, h := range s.TokenSHA256 {
			d, err := hex.DecodeString(h)
			if err != nil || len(d) != sha256.Size {
				return nil, fmt.Errorf("principal %q: token_sha256 %q is not 64 hex digits (sha256sum of the token)", s.Name, h)
			}
			k := [sha256.Size]byte(d)
			if o := ids.byToken[k]; o != nil {
				return nil, fmt.Errorf("principals %q and %q share a token", o.Name, s.Name)
			}
			ids.byToken[k] = p
		}
		if err := addSANs(ids.byURI, s.URISANs, p, "uri_sans", false); err != nil {
			return nil, err
		}
		if err := addSANs(ids.byDNS, s.DNSSANs, p, "dns_sans", true); err != nil {
			return nil, err
		}
		ids.needsClientCerts = ids.needsClientCerts || len(s.URISANs)+len(s.DNSSANs) > 0
	}
	if f.JWT != nil {
		v, err := f.JWT.verifier(dir, byName)
		if err != nil {
			return nil, err
		}
		ids.jwt = v
	}
	return ids, nil
}

func addSANs(m map[string]*Principal, sans []string, p *Principal, field string, fold bool) error {
	for _, s := range sans {
		if fold {
			s = strings.ToLower(s)
		}
		if s == "" || strings.ContainsAny(s, " *") {
			return fmt.Errorf("principal %q: %s entry %q: want an exact name (no wildcards)", p.Name, field, s)
		}
		if o := m[s]; o != nil {
			return fmt.Errorf("principals %q and %q share %s %q", o.Name, p.Name, field, s)
		}
		m[s] = p
	}
	return nil
}

func (s principalSpec) principal() (*Principal, error) {
	p := &Principal{Name: s.Name, operator: s.Operator}
	for _, g := range s.Grants {
		r, ok := parseRole(g.Role)
		if !ok {
			return nil, fmt.Errorf("grant on %q: role %q: want reader, writer or admin", g.Namespace, g.Role)
		}
		pat := g.Namespace
		if pat == "" || strings.Contains(strings.TrimSuffix(pat, "*"), "*") {
			return nil, fmt.Errorf("grant namespace %q: want a name, a prefix ending in *, or *", pat)
		}
		if pat == "*" {
			p.everywhere = max(p.everywhere, r)
			continue
		}
		p.grants = append(p.grants, grant{pattern: pat, role: r})
	}
	return p, nil
}

// identitySource loads the identities a node authenticates with: the
// --auth-file, or the --auth-token-file's single principal. Both are read
// again on reload (SIGHUP).
type identitySource struct {
	authFile, tokenFile string
}

func (s identitySource) enabled() bool { return s.authFile != "" || s.tokenFile != "" }

// describe is the serving line's "auth": which source, or none.
func (s identitySource) describe() string {
	switch {
	case s.authFile != "":
		return "auth-file"
	case s.tokenFile != "":
		return "token"
	}
	return "none"
}

func (s identitySource) load() (*identities, error) {
	if s.authFile != "" {
		return loadIdentities(s.authFile)
	}
	tok, err := client.ReadToken(s.tokenFile)
	if err != nil {
		return nil, err
	}
	return tokenIdentities(tok), nil
}

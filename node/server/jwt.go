package server

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// jwtSpec is the "jwt" object of an --auth-file (docs/OPERATIONS.md,
// Tenants): a bearer credential that is a JWT signed by a key of the JWKS
// file authenticates as the principal its claim names.
type jwtSpec struct {
	// JWKSFile is read with the --auth-file (a relative path is relative
	// to the --auth-file's directory), and again on every reload.
	JWKSFile string `json:"jwks_file"`
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
	// PrincipalClaim names the principal (default "sub").
	PrincipalClaim string `json:"principal_claim"`
	// GrantsClaim, when set, is a claim holding grants as
	// "<namespace>:<role>" strings, added to the file principal's.
	GrantsClaim   string `json:"grants_claim"`
	LeewaySeconds int    `json:"leeway_seconds"`
}

// jwtAlgorithms are the signature algorithms accepted: RS256, ES256 and
// EdDSA. "none" and the HMAC ones never are (a JWKS holds public keys).
var jwtAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// maxJWTLeeway bounds leeway_seconds: more would make expiry meaningless.
const maxJWTLeeway = 5 * time.Minute

// jwtCacheMax bounds the verified tokens remembered (jwtVerifier.cache).
const jwtCacheMax = 4096

// jwtVerifier authenticates JWT bearer credentials.
//
// Invariants: a token is accepted only if its signature verifies with the
// JWKS key its header's kid names, under an accepted algorithm the key
// allows; its iss and aud are the configured ones; it has an exp, is not
// expired and is valid already (nbf, iat), within the leeway; and its
// principal claim names a principal of the file, or grants_claim gives it
// grants. A verified token is remembered until its expiry (the signature
// check costs tens of µs; a client sends one token many times), so the
// cache never accepts what verification would refuse: only the clock moves,
// and the expiry is checked on every hit. A reload builds a new verifier
// and so forgets every verified token.
type jwtVerifier struct {
	keys           jose.JSONWebKeySet
	issuer         string
	audience       string
	principalClaim string
	grantsClaim    string
	leeway         time.Duration
	// byName are the file's principals.
	byName map[string]*Principal
	now    func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]verifiedJWT
}

type verifiedJWT struct {
	p   *Principal
	exp time.Time
}

func (s *jwtSpec) verifier(dir string, byName map[string]*Principal) (*jwtVerifier, error) {
	if s.JWKSFile == "" || s.Issuer == "" || s.Audience == "" {
		return nil, fmt.Errorf("jwt: jwks_file, issuer and audience are all required")
	}
	if s.LeewaySeconds < 0 || time.Duration(s.LeewaySeconds)*time.Second > maxJWTLeeway {
		return nil, fmt.Errorf("jwt: leeway_seconds %d: want 0 to %d", s.LeewaySeconds, int(maxJWTLeeway/time.Second))
	}
	path := s.JWKSFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jwt: jwks_file: %w", err)
	}
	v := &jwtVerifier{issuer: s.Issuer, audience: s.Audience, principalClaim: s.PrincipalClaim, grantsClaim: s.GrantsClaim,
		leeway: time.Duration(s.LeewaySeconds) * time.Second, byName: byName, now: time.Now,
		cache: map[[sha256.Size]byte]verifiedJWT{}}
	if v.principalClaim == "" {
		v.principalClaim = "sub"
	}
	if err := json.Unmarshal(b, &v.keys); err != nil {
		return nil, fmt.Errorf("jwt: jwks_file %s is not a JWK set: %w", path, err)
	}
	if len(v.keys.Keys) == 0 {
		return nil, fmt.Errorf("jwt: jwks_file %s holds no key", path)
	}
	for _, k := range v.keys.Keys {
		if k.KeyID == "" {
			return nil, fmt.Errorf("jwt: jwks_file %s: every key needs a kid (tokens name their key by it)", path)
		}
		if !k.IsPublic() {
			return nil, fmt.Errorf("jwt: jwks_file %s: key %q is not a public key (RSA, EC P-256 or Ed25519; never a private or shared secret)", path, k.KeyID)
		}
	}
	return v, nil
}

// looksLikeJWT: a compact JWS has three dot-separated parts.
func looksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// principal is the principal of the JWT raw, or an UNAUTHENTICATED error
// saying which check it failed.
func (v *jwtVerifier) principal(raw string) (*Principal, error) {
	key := sha256.Sum256([]byte(raw))
	now := v.now()
	v.mu.Lock()
	hit, ok := v.cache[key]
	v.mu.Unlock()
	if ok && !now.Add(-v.leeway).After(hit.exp) {
		return hit.p, nil
	}
	p, exp, err := v.verify(raw, now)
	if err != nil {
		return nil, errs.Unauthenticated("JWT refused: %v", err)
	}
	v.mu.Lock()
	if len(v.cache) >= jwtCacheMax {
		clear(v.cache) // rare; the next requests verify again
	}
	v.cache[key] = verifiedJWT{p: p, exp: exp}
	v.mu.Unlock()
	return p, nil
}

func (v *jwtVerifier) verify(raw string, now time.Time) (*Principal, time.Time, error) {
	tok, err := jwt.ParseSigned(raw, jwtAlgorithms)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("not a JWT signed with RS256, ES256 or EdDSA")
	}
	h := tok.Headers[0]
	keys := v.keys.Key(h.KeyID)
	if len(keys) == 0 {
		return nil, time.Time{}, fmt.Errorf("unknown key id %q", clipName(h.KeyID))
	}
	var claims jwt.Claims
	var extra map[string]any
	verified := false
	for _, k := range keys {
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			continue
		}
		if tok.Claims(k.Key, &claims, &extra) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, time.Time{}, fmt.Errorf("signature does not verify with key %q", clipName(h.KeyID))
	}
	if claims.Expiry == nil {
		return nil, time.Time{}, fmt.Errorf("no exp claim (a token must expire)")
	}
	err = claims.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: jwt.Audience{v.audience}, Time: now}, v.leeway)
	switch {
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, time.Time{}, fmt.Errorf("issuer %q is not %q", clipName(claims.Issuer), v.issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, time.Time{}, fmt.Errorf("audience does not include %q", v.audience)
	case errors.Is(err, jwt.ErrExpired):
		return nil, time.Time{}, fmt.Errorf("expired at %s", claims.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, time.Time{}, fmt.Errorf("not valid before %s", claims.NotBefore.Time().UTC().Format(time.RFC3339))
	case err != nil:
		return nil, time.Time{}, err
	}
	p, err := v.claimed(extra)
	return p, claims.Expiry.Time(), err
}

// claimed is the principal the verified claims name.
func (v *jwtVerifier) claimed(extra map[string]any) (*Principal, error) {
	name, _ := extra[v.principalClaim].(string)
	if name == "" {
		return nil, fmt.Errorf("claim %q (the principal) is missing or not a string", v.principalClaim)
	}
	filed := v.byName[name]
	raw, has := extra[v.grantsClaim]
	if v.grantsClaim == "" || !has {
		if filed == nil {
			return nil, fmt.Errorf("principal %q is not in the identities file", clipName(name))
		}
		return filed, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("claim %q (grants) is not a list of \"<namespace>:<role>\" strings", v.grantsClaim)
	}
	var grants []string
	for _, g := range list {
		s, ok := g.(string)
		if !ok {
			return nil, fmt.Errorf("claim %q: a grant is not a \"<namespace>:<role>\" string", v.grantsClaim)
		}
		grants = append(grants, s)
	}
	p, err := NewPrincipal(name, filed != nil && filed.operator, grants...)
	if err != nil {
		return nil, fmt.Errorf("claim %q: %w", v.grantsClaim, err)
	}
	if filed != nil {
		p.grants = append(p.grants, filed.grants...)
		p.everywhere = max(p.everywhere, filed.everywhere)
	}
	return p, nil
}

package server

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	testIssuer   = "https://issuer.example"
	testAudience = "agentstate"
)

// jwtKey is a signing key of the tests' issuer and its JWKS entry.
type jwtKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newJWTKeys(t testing.TB) []jwtKey {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return []jwtKey{{"rsa-1", jose.RS256, rsaKey}, {"ec-1", jose.ES256, ecKey}, {"ed-1", jose.EdDSA, edKey}}
}

// writeJWKS writes the public halves of keys as a JWKS file in dir.
func writeJWKS(t testing.TB, dir string, keys []jwtKey) {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jwks.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// jwtIdentities is an identities file trusting the JWKS beside it:
// principal "app" (writer of local) by JWT only, "root" by token.
func jwtIdentities(grantsClaim string) string {
	return `{"principals":[
		{"name":"app","grants":[{"namespace":"local","role":"writer"}]},
		{"name":"root","token_sha256":["` + hashHex("tok-root") + `"],"operator":true,"grants":[{"namespace":"*","role":"admin"}]}],
	 "jwt":{"jwks_file":"jwks.json","issuer":"` + testIssuer + `","audience":"` + testAudience + `","grants_claim":"` + grantsClaim + `"}}`
}

// claimsFor are valid claims naming sub, for the tests to spoil.
func claimsFor(sub string) jwt.Claims {
	now := time.Now()
	return jwt.Claims{Issuer: testIssuer, Audience: jwt.Audience{testAudience}, Subject: sub,
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute))}
}

func signJWT(t testing.TB, k jwtKey, kid string, claims ...any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.priv},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid))
	if err != nil {
		t.Fatal(err)
	}
	b := jwt.Signed(sig)
	for _, c := range claims {
		b = b.Claims(c)
	}
	s, err := b.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func loadJWTIdentities(t *testing.T, dir, grantsClaim string) *identities {
	t.Helper()
	path := filepath.Join(dir, "identities.json")
	writeFile(t, path, jwtIdentities(grantsClaim))
	ids, err := loadIdentities(path)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// Each algorithm's token authenticates as the principal its sub names;
// every check refuses what it must, saying which check failed.
func TestJWTVerification(t *testing.T) {
	dir := t.TempDir()
	keys := newJWTKeys(t)
	writeJWKS(t, dir, keys)
	ids := loadJWTIdentities(t, dir, "")
	for _, k := range keys {
		p, err := ids.jwt.principal(signJWT(t, k, k.kid, claimsFor("app")))
		if err != nil || p.Name != "app" || p.role("local") != roleWriter {
			t.Fatalf("%s: %v, %+v; want app, writer of local", k.alg, err, p)
		}
	}
	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rs := keys[0]
	spoil := func(f func(*jwt.Claims)) jwt.Claims { c := claimsFor("app"); f(&c); return c }
	bad := []struct{ name, token, want string }{
		{"wrong issuer", signJWT(t, rs, rs.kid, spoil(func(c *jwt.Claims) { c.Issuer = "https://other.example" })), "issuer"},
		{"wrong audience", signJWT(t, rs, rs.kid, spoil(func(c *jwt.Claims) { c.Audience = jwt.Audience{"someone-else"} })), "audience"},
		{"expired", signJWT(t, rs, rs.kid, spoil(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(time.Now().Add(-time.Second)) })), "expired"},
		{"not yet valid", signJWT(t, rs, rs.kid, spoil(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour)) })), "not valid before"},
		{"no expiry", signJWT(t, rs, rs.kid, spoil(func(c *jwt.Claims) { c.Expiry = nil })), "no exp"},
		{"unknown kid", signJWT(t, rs, "rsa-2", claimsFor("app")), "unknown key id"},
		{"wrong signature", signJWT(t, jwtKey{alg: jose.RS256, priv: stranger}, rs.kid, claimsFor("app")), "signature does not verify"},
		{"key of another algorithm", signJWT(t, keys[2], rs.kid, claimsFor("app")), "signature does not verify"},
		{"unknown principal", signJWT(t, rs, rs.kid, claimsFor("nobody")), "not in the identities file"},
		{"no principal", signJWT(t, rs, rs.kid, claimsFor("")), "missing"},
		{"tampered payload", tamper(signJWT(t, rs, rs.kid, claimsFor("app"))), "JWT refused"},
	}
	for _, c := range bad {
		p, err := ids.jwt.principal(c.token)
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), c.want) || p != nil {
			t.Errorf("%s: %v (%v), want UNAUTHENTICATED with %q", c.name, err, p, c.want)
		}
	}
}

// tamper replaces the payload of a compact JWS with one naming "root".
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	c := claimsFor("root")
	b, _ := json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// A remembered token is still refused once it expires: the cache skips
// the signature check, never the clock.
func TestJWTCacheHonoursExpiry(t *testing.T) {
	dir := t.TempDir()
	keys := newJWTKeys(t)
	writeJWKS(t, dir, keys)
	ids := loadJWTIdentities(t, dir, "")
	now := time.Now()
	ids.jwt.now = func() time.Time { return now }
	c := claimsFor("app")
	c.Expiry = jwt.NewNumericDate(now.Add(time.Minute))
	tok := signJWT(t, keys[1], keys[1].kid, c)
	for i := 0; i < 2; i++ {
		if _, err := ids.jwt.principal(tok); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	now = now.Add(2 * time.Minute)
	if _, err := ids.jwt.principal(tok); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("after expiry: %v, want UNAUTHENTICATED expired", err)
	}
}

// With grants_claim, the token's grants are the principal's (added to the
// file's, if it names one there); never the operator role.
func TestJWTGrantsClaim(t *testing.T) {
	dir := t.TempDir()
	keys := newJWTKeys(t)
	writeJWKS(t, dir, keys)
	ids := loadJWTIdentities(t, dir, "agentstate_grants")
	grants := map[string]any{"agentstate_grants": []string{"team-*:reader", "b:admin"}}
	p, err := ids.jwt.principal(signJWT(t, keys[2], keys[2].kid, claimsFor("tenant-b"), grants))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "tenant-b" || p.role("b") != roleAdmin || p.role("team-x") != roleReader || p.role("local") != roleNone || p.operator {
		t.Fatalf("tenant-b: %+v", p)
	}
	p, err = ids.jwt.principal(signJWT(t, keys[2], keys[2].kid, claimsFor("app"), grants))
	if err != nil || p.role("local") != roleWriter || p.role("b") != roleAdmin {
		t.Fatalf("app with claimed grants: %v %+v; want its file grant and the claim's", err, p)
	}
	bad := map[string]any{"agentstate_grants": []string{"b:owner"}}
	if _, err := ids.jwt.principal(signJWT(t, keys[2], keys[2].kid, claimsFor("x"), bad)); err == nil || !strings.Contains(err.Error(), "want reader, writer or admin") {
		t.Fatalf("a bad claimed role: %v", err)
	}
}

func TestJWTSectionIsCheckedStrictly(t *testing.T) {
	dir := t.TempDir()
	keys := newJWTKeys(t)
	writeJWKS(t, dir, keys)
	var set jose.JSONWebKeySet
	set.Keys = append(set.Keys, jose.JSONWebKey{Key: keys[0].priv, KeyID: "private", Algorithm: "RS256"})
	b, _ := json.Marshal(set)
	if err := os.WriteFile(filepath.Join(dir, "private.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := `{"principals":[{"name":"app"}],"jwt":`
	for _, c := range []struct{ file, want string }{
		{p + `{"jwks_file":"jwks.json","issuer":"i"}}`, "all required"},
		{p + `{"jwks_file":"missing.json","issuer":"i","audience":"a"}}`, "no such file"},
		{p + `{"jwks_file":"private.json","issuer":"i","audience":"a"}}`, "not a public key"},
		{p + `{"jwks_file":"jwks.json","issuer":"i","audience":"a","leeway_seconds":3600}}`, "leeway_seconds"},
		{p + `{"jwks_file":"jwks.json","issuer":"i","audience":"a","algorithm":"HS256"}}`, "unknown field"},
		{`{"principals":[{"name":"app"}]}`, "no credential"},
	} {
		if _, err := parseIdentitiesIn([]byte(c.file), dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.file, err, c.want)
		}
	}
}

// Over gRPC: a JWT is a bearer credential like a token; the principal it
// names is authorized by its grants; a reload re-reads the JWKS (a key
// removed from it is refused from then on), and a reload of a broken
// JWKS keeps the keys in force.
func TestJWTOverGRPCAndReload(t *testing.T) {
	dir := t.TempDir()
	keys := newJWTKeys(t)
	writeJWKS(t, dir, keys)
	path := filepath.Join(dir, "identities.json")
	writeFile(t, path, jwtIdentities(""))
	n := startAuthNode(t, path, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bearer := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	ec := signJWT(t, keys[1], keys[1].kid, claimsFor("app"))
	if _, err := n.ss.Create(bearer(ec), &sessionv1.CreateSessionRequest{ActorName: "a"}); err != nil {
		t.Fatalf("create in local by JWT: %v", err)
	}
	_, err := n.ss.Create(bearer(ec), &sessionv1.CreateSessionRequest{ActorName: "a", Namespace: "b"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("create in b by a writer of local: %v, want PERMISSION_DENIED", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jwks.json"), []byte(`{"keys":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.s.reloadAuth(); err == nil || !strings.Contains(err.Error(), "previous ones stay") {
		t.Fatalf("reload with a broken JWKS: %v", err)
	}
	if _, err := n.ss.List(bearer(ec), &sessionv1.ListSessionsRequest{}); err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}
	writeJWKS(t, dir, keys[:1]) // the EC key retired
	if err := n.s.reloadAuth(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ss.List(bearer(ec), &sessionv1.ListSessionsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a retired key's token after reload: %v, want UNAUTHENTICATED", err)
	}
	if _, err := n.ss.List(bearer(signJWT(t, keys[0], keys[0].kid, claimsFor("app"))), &sessionv1.ListSessionsRequest{}); err != nil {
		t.Fatalf("a kept key's token after reload: %v", err)
	}
}

package server

import (
	"crypto/sha256"
	"os"
	"strings"
	"testing"
)

func TestIdentitiesFileIsParsedStrictly(t *testing.T) {
	h := hashHex("t")
	bad := []struct{ name, file, want string }{
		{"not JSON", `principals:`, "not an identities file"},
		{"unknown field", `{"principals":[{"name":"a","token_sha256":["` + h + `"],"role":"admin"}]}`, "unknown field"},
		{"no principals", `{"principals":[]}`, "no principals"},
		{"no name", `{"principals":[{"token_sha256":["` + h + `"]}]}`, "has no name"},
		{"twice", `{"principals":[{"name":"a","token_sha256":["` + h + `"]},{"name":"a","dns_sans":["x"]}]}`, "appears twice"},
		{"no credential", `{"principals":[{"name":"a","grants":[{"namespace":"x","role":"reader"}]}]}`, "no credential"},
		{"short hash", `{"principals":[{"name":"a","token_sha256":["abc"]}]}`, "not 64 hex digits"},
		{"shared token", `{"principals":[{"name":"a","token_sha256":["` + h + `"]},{"name":"b","token_sha256":["` + h + `"]}]}`, "share a token"},
		{"shared SAN", `{"principals":[{"name":"a","dns_sans":["W.example"]},{"name":"b","dns_sans":["w.example"]}]}`, "share dns_sans"},
		{"wildcard SAN", `{"principals":[{"name":"a","dns_sans":["*.example"]}]}`, "no wildcards"},
		{"bad role", `{"principals":[{"name":"a","token_sha256":["` + h + `"],"grants":[{"namespace":"x","role":"owner"}]}]}`, "want reader, writer or admin"},
		{"inner star", `{"principals":[{"name":"a","token_sha256":["` + h + `"],"grants":[{"namespace":"a*b","role":"reader"}]}]}`, "prefix ending in *"},
		{"empty namespace", `{"principals":[{"name":"a","token_sha256":["` + h + `"],"grants":[{"role":"reader"}]}]}`, "want a name"},
		{"trailing text", `{"principals":[{"name":"a","token_sha256":["` + h + `"]}]} {}`, "text after"},
	}
	for _, c := range bad {
		_, err := parseIdentities([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func TestGrantsGiveTheHighestMatchingRole(t *testing.T) {
	ids, err := parseIdentities([]byte(`{"principals":[
		{"name":"app","token_sha256":["` + hashHex("t1") + `","` + hashHex("t2") + `"],
		 "grants":[{"namespace":"team-*","role":"reader"},{"namespace":"team-x","role":"admin"},{"namespace":"other","role":"writer"}]},
		{"name":"ops","dns_sans":["Ops.Example"],"operator":true,"grants":[{"namespace":"*","role":"reader"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	app := ids.byToken[sha(t, "t1")]
	if app == nil || app != ids.byToken[sha(t, "t2")] || app.Name != "app" {
		t.Fatalf("both tokens must name app: %v", app)
	}
	for ns, want := range map[string]role{"team-a": roleReader, "team-x": roleAdmin, "other": roleWriter, "others": roleNone, "team": roleNone} {
		if got := app.role(ns); got != want {
			t.Errorf("app on %q: %v, want %v", ns, got, want)
		}
	}
	if _, ok := app.only(); ok || app.operator {
		t.Error("app reads several namespaces and is no operator")
	}
	ops := ids.byDNS["ops.example"]
	if ops == nil || !ops.operator || ops.role("anything") != roleReader || ops.everywhere != roleReader {
		t.Fatalf("ops: %+v", ops)
	}
	if !ids.needsClientCerts {
		t.Error("a dns_sans principal needs client certificates")
	}
	one, _ := parseIdentities([]byte(`{"principals":[{"name":"a","token_sha256":["` + hashHex("t") + `"],"grants":[{"namespace":"mine","role":"reader"}]}]}`))
	if ns, ok := one.byToken[sha(t, "t")].only(); !ok || ns != "mine" {
		t.Errorf("only: %q %v, want mine", ns, ok)
	}
}

func sha(t *testing.T, tok string) [sha256.Size]byte {
	t.Helper()
	return sha256Of(tok)
}

func sha256Of(tok string) [sha256.Size]byte { return sha256.Sum256([]byte(tok)) }

// The example identities file of docs/OPERATIONS.md (Tenants) is a valid
// one, and means what the text around it says.
func TestOperationsExampleIdentitiesFile(t *testing.T) {
	doc, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Tenants")
	_, block, ok2 := strings.Cut(section, "```json\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/OPERATIONS.md has no Tenants section with a JSON example")
	}
	ids, err := parseIdentities([]byte(block))
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	bot := ids.byToken[sha256Of("test")]
	if bot == nil || bot != ids.byToken[sha256Of("test2")] || bot.role("support") != roleWriter || bot.role("other") != roleNone {
		t.Errorf("support-bot: %+v", bot)
	}
	if d := ids.byURI["spiffe://example.org/ns/obs/sa/dashboards"]; d == nil || d.role("team-x") != roleReader || d.role("support") != roleReader {
		t.Errorf("dashboards: %+v", d)
	}
	if o := ids.byDNS["ops.example.org"]; o == nil || !o.operator || o.role("anything") != roleAdmin {
		t.Errorf("ops: %+v", o)
	}
}

package testpki_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/agentstate/agentstate/tests/testpki"
)

// A leaf verifies against the CA file for 127.0.0.1 as server and client;
// a rogue leaf does not.
func TestLeavesChainToTheCAAndRogueOnesDoNot(t *testing.T) {
	p := testpki.New(t)
	pemCA, err := os.ReadFile(p.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemCA) {
		t.Fatal("CA file holds no certificate")
	}
	verify := func(cert, key string, usage x509.ExtKeyUsage) error {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	cert, key := p.Leaf(t, "node")
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := verify(cert, key, u); err != nil {
			t.Errorf("leaf, usage %v: %v", u, err)
		}
	}
	rc, rk := p.RogueLeaf(t, "rogue")
	if err := verify(rc, rk, x509.ExtKeyUsageServerAuth); err == nil {
		t.Error("the rogue leaf verified against the CA")
	}
}

// Package testpki makes throwaway certificate authorities for tests that
// run nodes with TLS: a CA whose certificate file the nodes trust, leaves it
// signs, and leaves of a rogue CA that nobody trusts. Every leaf is valid
// for 127.0.0.1 and localhost, as server and as client (a remote endpoint
// dials back to its peers). Files live in the test's temporary directory.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is one trusted CA and one rogue CA.
type PKI struct {
	// CA is the path of the trusted CA's certificate (PEM).
	CA string

	dir             string
	caKey, rogueKey *ecdsa.PrivateKey
	caCert, rogueCA *x509.Certificate
}

// New makes both authorities and writes the trusted one's certificate.
func New(tb testing.TB) *PKI {
	tb.Helper()
	p := &PKI{dir: tb.TempDir()}
	p.caKey, p.caCert = authority(tb, "agentstate test CA")
	p.rogueKey, p.rogueCA = authority(tb, "rogue CA")
	p.CA = p.write(tb, "ca.pem", "CERTIFICATE", p.caCert.Raw)
	return p
}

// Leaf writes a certificate named name signed by the trusted CA, and its
// key; name must be unique within p.
func (p *PKI) Leaf(tb testing.TB, name string) (certPath, keyPath string) {
	tb.Helper()
	return p.leaf(tb, name, p.caCert, p.caKey)
}

// RogueLeaf writes a certificate signed by the rogue CA, which nodes
// trusting p.CA refuse.
func (p *PKI) RogueLeaf(tb testing.TB, name string) (certPath, keyPath string) {
	tb.Helper()
	return p.leaf(tb, name, p.rogueCA, p.rogueKey)
}

func authority(tb testing.TB, cn string) (*ecdsa.PrivateKey, *x509.Certificate) {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return key, cert
}

// ClientLeaf writes a client certificate signed by the trusted CA whose
// only names are the DNS SANs and URI SANs (SPIFFE ids) given: what a
// node's --auth-file principals are matched by.
func (p *PKI) ClientLeaf(tb testing.TB, name string, dnsNames, uris []string) (certPath, keyPath string) {
	tb.Helper()
	var us []*url.URL
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			tb.Fatal(err)
		}
		us = append(us, u)
	}
	return p.leaf(tb, name, p.caCert, p.caKey, func(c *x509.Certificate) {
		c.IPAddresses, c.DNSNames, c.URIs = nil, dnsNames, us
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
}

func (p *PKI) leaf(tb testing.TB, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, edit ...func(*x509.Certificate)) (certPath, keyPath string) {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	for _, e := range edit {
		e(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return p.write(tb, name+".pem", "CERTIFICATE", der), p.write(tb, name+"-key.pem", "EC PRIVATE KEY", kb)
}

func (p *PKI) write(tb testing.TB, name, kind string, der []byte) string {
	tb.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

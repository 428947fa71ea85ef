package cluster_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// clusterPKI is a throwaway CA for a cluster on loopback: the members'
// certificate (valid for 127.0.0.1, as server and as client: members dial
// each other) and a rogue one from another CA.
type clusterPKI struct {
	dir                 string
	CA                  string
	MemberCert, Key     string
	RogueCert, RogueKey string
}

func newClusterPKI(t *testing.T) *clusterPKI {
	t.Helper()
	p := &clusterPKI{dir: t.TempDir()}
	caKey, ca := p.authority(t, "cluster test CA")
	rogueKey, rogue := p.authority(t, "rogue CA")
	p.CA = p.write(t, "ca.pem", "CERTIFICATE", ca.Raw)
	p.MemberCert, p.Key = p.leaf(t, "member", ca, caKey)
	p.RogueCert, p.RogueKey = p.leaf(t, "rogue", rogue, rogueKey)
	return p
}

// mtlsFlags are the serve flags of a member with the cluster's certificate.
func (p *clusterPKI) mtlsFlags() []string {
	return []string{"--remote-tls-cert", p.MemberCert, "--remote-tls-key", p.Key, "--remote-tls-ca", p.CA}
}

func (p *clusterPKI) authority(t *testing.T, cn string) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func (p *clusterPKI) leaf(t *testing.T, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPath, keyPath string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", kb)
}

func (p *clusterPKI) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

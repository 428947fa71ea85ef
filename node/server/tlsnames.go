package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc/credentials"
)

// Go has refused certificates that name their host only in the subject
// Common Name since 1.15: the name must be in a Subject Alternative Name.
// The handshake error it gives ("certificate relies on legacy Common Name
// field") reaches an operator through gRPC's connection error; these
// helpers say what it means and what to do, where a node dials (the CLI,
// the remote endpoint dialing its peers) and when a node loads such a
// certificate of its own.

// sanHint is the remedy, named once.
const sanHint = "reissue it with its names as subjectAltName entries (DNS:host, IP:address; " +
	"docs/OPERATIONS.md, \"TLS\", has an openssl recipe)"

// explainingCreds are TLS transport credentials whose client handshake
// failure on a CN-only certificate says so in a sentence.
type explainingCreds struct {
	credentials.TransportCredentials
	what string // whose certificate the dialer verifies: "the node", "the peer"
}

// explainCNOnly wraps c (client side) for the certificates of what.
func ExplainCNOnly(c credentials.TransportCredentials, what string) credentials.TransportCredentials {
	return &explainingCreds{TransportCredentials: c, what: what}
}

func (c *explainingCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, conn)
	if err != nil {
		err = cnOnlyError(err, c.what)
	}
	return out, info, err
}

func (c *explainingCreds) Clone() credentials.TransportCredentials {
	return &explainingCreds{TransportCredentials: c.TransportCredentials.Clone(), what: c.what}
}

// cnOnlyError turns a handshake error caused by a CN-only certificate of
// what into a sentence saying so; any other error is returned as is.
func cnOnlyError(err error, what string) error {
	var he x509.HostnameError
	if !errors.As(err, &he) || he.Certificate == nil || !cnOnly(he.Certificate) {
		return err
	}
	return fmt.Errorf("TLS: %s presented a certificate that names %q only in its subject Common Name, "+
		"which Go has refused since 1.15 (the name must be a Subject Alternative Name): %s (%w)",
		what, he.Certificate.Subject.CommonName, sanHint, err)
}

// cnOnly reports whether c names a host only in its Common Name.
func cnOnly(c *x509.Certificate) bool {
	return c.Subject.CommonName != "" && len(c.DNSNames) == 0 && len(c.IPAddresses) == 0 && len(c.URIs) == 0
}

// warnCNOnly logs a warning when the node's own certificate (flag names
// it) carries no Subject Alternative Name: Go clients and peers will fail
// to verify it.
func warnCNOnly(log *slog.Logger, flag string, cert tls.Certificate) {
	if len(cert.Certificate) == 0 {
		return
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || !cnOnly(leaf) {
		return
	}
	log.Warn("TLS: "+flag+" names its host only in the subject Common Name; Go clients and peers (1.15 and later) "+
		"refuse such a certificate: "+sanHint, "common_name", leaf.Subject.CommonName)
}

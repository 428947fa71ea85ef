package client

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
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

// SANHint is the remedy, named once (the node uses it too, when it loads
// such a certificate of its own).
const SANHint = "reissue it with its names as subjectAltName entries (DNS:host, IP:address; " +
	"docs/OPERATIONS.md, \"TLS\", has an openssl recipe)"

// explainingCreds are TLS transport credentials whose client handshake
// failure on a CN-only certificate says so in a sentence.
type explainingCreds struct {
	credentials.TransportCredentials
	what string // whose certificate the dialer verifies: "the node", "the peer"
}

// ExplainCNOnly wraps c (client side) for the certificates of what.
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
	if !errors.As(err, &he) || he.Certificate == nil || !CNOnly(he.Certificate) {
		return err
	}
	return fmt.Errorf("TLS: %s presented a certificate that names %q only in its subject Common Name, "+
		"which Go has refused since 1.15 (the name must be a Subject Alternative Name): %s (%w)",
		what, he.Certificate.Subject.CommonName, SANHint, err)
}

// CNOnly reports whether c names a host only in its Common Name.
func CNOnly(c *x509.Certificate) bool {
	return c.Subject.CommonName != "" && len(c.DNSNames) == 0 && len(c.IPAddresses) == 0 && len(c.URIs) == 0
}

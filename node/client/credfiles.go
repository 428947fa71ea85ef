package client

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"
)

// The node's credential files, read alike by the server and by clients
// (the CLI): a bearer token file and a CA bundle.

// ReadToken reads a bearer token file: the token is its content with
// surrounding white space removed, and must not be empty.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// LoadCertPool reads a PEM CA bundle.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

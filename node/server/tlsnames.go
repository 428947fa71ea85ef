package server

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"

	"github.com/agentstate/agentstate/node/client"
)

// Go has refused certificates that name their host only in the subject
// Common Name since 1.15 (client.ExplainCNOnly says so where a node
// dials); warnCNOnly says it when a node loads such a certificate of its
// own.

// warnCNOnly logs a warning when the node's own certificate (flag names
// it) carries no Subject Alternative Name: Go clients and peers will fail
// to verify it.
func warnCNOnly(log *slog.Logger, flag string, cert tls.Certificate) {
	if len(cert.Certificate) == 0 {
		return
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || !client.CNOnly(leaf) {
		return
	}
	log.Warn("TLS: "+flag+" names its host only in the subject Common Name; Go clients and peers (1.15 and later) "+
		"refuse such a certificate: "+client.SANHint, "common_name", leaf.Subject.CommonName)
}

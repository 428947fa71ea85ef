package server

import (
	"fmt"
	"net"
	"strings"
)

// InsecureRemoteFlag is the flag that lets the remote endpoint and the
// cluster run without mutual TLS, on a loopback address only: for tests on
// one machine. Its name says what it costs.
const InsecureRemoteFlag = "--insecure-remote-plaintext-loopback"

// checkRemoteSecurity refuses a remote endpoint or cluster member that
// strangers could reach without a certificate. Every actor message a peer
// sends is trusted as the node's own (creating sessions, pruning the
// audit log, answering the cluster's requests, gossiping membership): so
// the listener either authenticates its peers with mutual TLS, or binds a
// loopback address with InsecureRemoteFlag set. host is the address the
// remote binds ("" for every interface).
func checkRemoteSecurity(f *Config, host string) error {
	mtls := f.RemoteCert != "" || f.RemoteKey != "" || f.RemoteCA != ""
	if mtls {
		return nil // mutualTLS checks that all three are given
	}
	what := "--remote-addr"
	if f.ClusterName != "" {
		what = "--cluster"
	}
	if !f.RemoteInsecureLoopback {
		return fmt.Errorf("%s without mutual TLS would let any peer that reaches it act as a member of this node: "+
			"give --remote-tls-cert, --remote-tls-key and --remote-tls-ca (peers need a certificate from that CA), "+
			"or, for tests on one machine, bind a loopback address and set %s", what, InsecureRemoteFlag)
	}
	if !isLoopbackHost(host) {
		return fmt.Errorf("%s allows plaintext on a loopback address only; %s binds %q: use mutual TLS (--remote-tls-cert, --remote-tls-key, --remote-tls-ca)",
			InsecureRemoteFlag, what, host)
	}
	return nil
}

// isLoopbackHost reports whether host (an IP or "localhost") is a loopback
// address. Other names are not resolved: what they resolve to may change.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

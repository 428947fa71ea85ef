package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentstate/agentstate/actors/placement"
)

// Membership providers of --membership.
const (
	MembershipAutomanaged = "automanaged"
	MembershipEtcd        = "etcd"
)

// clusterFlags are the validated cluster settings of serve: a static peer
// list (peers, amPort) or etcd.
type clusterFlags struct {
	peers  []string
	amPort int
	etcd   *placement.EtcdConfig
	host   string
}

func isPostgres(data string) bool {
	return strings.HasPrefix(data, "postgres://") || strings.HasPrefix(data, "postgresql://")
}

// parseCluster validates --cluster and its membership flags; nil without
// --cluster. A cluster needs a store every member shares: PostgreSQL.
func parseCluster(f *Config) (*clusterFlags, error) {
	if f.ClusterName == "" {
		if f.Peers != "" || f.AMPort != 0 || f.Membership != "" || f.EtcdEndpoints != "" || f.GRPCAdvertise != "" {
			return nil, fmt.Errorf("--peers, --am-port, --membership, --etcd-endpoints and --grpc-advertise need --cluster")
		}
		return nil, nil
	}
	if err := checkGRPCAdvertise(f.GRPCAdvertise); err != nil {
		return nil, err
	}
	if !isPostgres(f.Data) {
		return nil, fmt.Errorf("--cluster needs a store all members share: --data postgres://HOST/DB")
	}
	c := &clusterFlags{host: "127.0.0.1"}
	if f.RemoteAddr != "" {
		host, port, err := net.SplitHostPort(f.RemoteAddr)
		if err != nil {
			return nil, fmt.Errorf("--remote-addr %q: %w", f.RemoteAddr, err)
		}
		if port != "0" {
			return nil, fmt.Errorf("--remote-addr in cluster mode takes port 0: a fresh port per start keeps peers from mistaking a restarted member for its predecessor")
		}
		c.host = host
	}
	membership := f.Membership
	if membership == "" {
		switch {
		case f.Peers != "":
			membership = MembershipAutomanaged
		case f.EtcdEndpoints != "":
			membership = MembershipEtcd
		default:
			return nil, fmt.Errorf("--cluster needs its membership: --peers (every member's host:am-port, with --am-port) or --membership etcd --etcd-endpoints HOST:PORT")
		}
	}
	var err error
	switch membership {
	case MembershipAutomanaged:
		err = c.automanaged(f)
	case MembershipEtcd:
		err = c.etcdFlags(f)
	default:
		err = fmt.Errorf("--membership %q: want %s or %s", membership, MembershipAutomanaged, MembershipEtcd)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// automanaged validates the static peer list, which must name this member.
func (c *clusterFlags) automanaged(f *Config) error {
	if f.EtcdEndpoints != "" || f.etcdAccess() {
		return fmt.Errorf("--etcd-* flags need --membership etcd")
	}
	if f.AMPort <= 0 || f.AMPort > 65535 {
		return fmt.Errorf("--membership automanaged needs --am-port, this member's automanaged port")
	}
	c.amPort = f.AMPort
	for _, p := range strings.Split(f.Peers, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(p); err != nil {
			return fmt.Errorf("--peers %q: %w", p, err)
		}
		c.peers = append(c.peers, p)
	}
	if len(c.peers) == 0 {
		return fmt.Errorf("--membership automanaged needs --peers (every member's host:am-port, this one included)")
	}
	for _, p := range c.peers {
		if peerIsSelf(p, c.host, f.RemoteAdvertise, f.AMPort) {
			return nil
		}
	}
	// Without itself the member would not be in its own topology: it would
	// start, and route every session to the others.
	return fmt.Errorf("--peers %s does not name this member: add its own host:am-port (%s)",
		strings.Join(c.peers, ","), net.JoinHostPort(c.host, strconv.Itoa(f.AMPort)))
}

// peerIsSelf reports whether peer is this member's automanaged address: its
// port is amPort and its host is the remote's host or advertised host, or
// resolves to an address of this machine.
func peerIsSelf(peer, host, advertise string, amPort int) bool {
	ph, pp, err := net.SplitHostPort(peer)
	if err != nil || pp != strconv.Itoa(amPort) {
		return false
	}
	if advertise != "" {
		if ah, _, err := net.SplitHostPort(advertise); err == nil && strings.EqualFold(ah, ph) {
			return true
		}
	}
	if strings.EqualFold(ph, host) || (isLoopbackHost(ph) && isLoopbackHost(host)) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, ph)
	if err != nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ip := range ips {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip.IP) {
				return true
			}
		}
	}
	return false
}

// etcdAccess reports whether a flag of etcd's access (TLS, credentials) is set.
func (f *Config) etcdAccess() bool {
	return f.EtcdPrefix != "" || f.EtcdTLSCA != "" || f.EtcdTLSCert != "" || f.EtcdTLSKey != "" ||
		f.EtcdUsername != "" || f.EtcdPasswordFile != ""
}

// etcdFlags validates etcd membership: endpoints, TLS and credentials.
func (c *clusterFlags) etcdFlags(f *Config) error {
	if f.Peers != "" || f.AMPort != 0 {
		return fmt.Errorf("--membership etcd takes no --peers or --am-port: members find each other in etcd")
	}
	e := &placement.EtcdConfig{Prefix: f.EtcdPrefix}
	for _, ep := range strings.Split(f.EtcdEndpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			e.Endpoints = append(e.Endpoints, ep)
		}
	}
	if len(e.Endpoints) == 0 {
		return fmt.Errorf("--membership etcd needs --etcd-endpoints (host:port of each etcd server, comma-separated)")
	}
	if strings.Contains(f.ClusterName, "/") {
		return fmt.Errorf("--cluster %q: with etcd membership a cluster name has no '/'", f.ClusterName)
	}
	var err error
	if e.TLS, err = etcdTLS(f); err != nil {
		return err
	}
	if (f.EtcdUsername == "") != (f.EtcdPasswordFile == "") {
		return fmt.Errorf("--etcd-username and --etcd-password-file go together")
	}
	if f.EtcdPasswordFile != "" {
		b, err := os.ReadFile(f.EtcdPasswordFile)
		if err != nil {
			return fmt.Errorf("--etcd-password-file: %w", err)
		}
		pw := strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			return fmt.Errorf("--etcd-password-file %s is empty", f.EtcdPasswordFile)
		}
		e.Username, e.Password = f.EtcdUsername, pw
	}
	c.etcd = e
	return nil
}

// etcdTLS is the TLS of the connection to etcd (nil: plaintext): the CA
// that signed etcd's certificate (default: the system's), and a client
// certificate when etcd asks for one.
func etcdTLS(f *Config) (*tls.Config, error) {
	if f.EtcdTLSCA == "" && f.EtcdTLSCert == "" && f.EtcdTLSKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.EtcdTLSCA != "" {
		pem, err := os.ReadFile(f.EtcdTLSCA)
		if err != nil {
			return nil, fmt.Errorf("--etcd-tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-tls-ca %s holds no PEM certificate", f.EtcdTLSCA)
		}
	}
	if (f.EtcdTLSCert == "") != (f.EtcdTLSKey == "") {
		return nil, fmt.Errorf("--etcd-tls-cert and --etcd-tls-key go together")
	}
	if f.EtcdTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(f.EtcdTLSCert, f.EtcdTLSKey)
		if err != nil {
			return nil, fmt.Errorf("--etcd-tls-cert/--etcd-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

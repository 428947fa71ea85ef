package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The membership flags: automanaged by default with --peers (which must
// name this member), etcd with --membership etcd or --etcd-endpoints; each
// refuses the other's flags, and every mistake is named.
func TestParseClusterMembership(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	base := func(set func(f *Config)) *Config {
		f := DefaultConfig()
		f.ClusterName, f.Data = "c", "postgres://db/x"
		set(f)
		return f
	}
	bad := []struct {
		name string
		set  func(f *Config)
		want string
	}{
		{"no membership", func(f *Config) {}, "--cluster needs its membership"},
		{"unknown membership", func(f *Config) { f.Membership = "zk" }, `--membership "zk"`},
		{"peers without self", func(f *Config) { f.Peers, f.AMPort = "127.0.0.1:7001,127.0.0.1:7002", 7000 }, "does not name this member"},
		{"peers without am-port", func(f *Config) { f.Peers = "127.0.0.1:7000" }, "needs --am-port"},
		{"etcd flags with automanaged", func(f *Config) {
			f.Peers, f.AMPort, f.EtcdUsername = "127.0.0.1:7000", 7000, "u"
		}, "--etcd-* flags need --membership etcd"},
		{"etcd without endpoints", func(f *Config) { f.Membership = MembershipEtcd }, "needs --etcd-endpoints"},
		{"etcd with peers", func(f *Config) {
			f.Membership, f.EtcdEndpoints, f.Peers = MembershipEtcd, "127.0.0.1:2379", "127.0.0.1:7000"
		}, "takes no --peers or --am-port"},
		{"etcd name with a slash", func(f *Config) { f.ClusterName, f.EtcdEndpoints = "a/b", "127.0.0.1:2379" }, "has no '/'"},
		{"username without password", func(f *Config) { f.EtcdEndpoints, f.EtcdUsername = "127.0.0.1:2379", "u" }, "go together"},
		{"empty password file", func(f *Config) {
			f.EtcdEndpoints, f.EtcdUsername, f.EtcdPasswordFile = "127.0.0.1:2379", "u", empty
		}, "is empty"},
		{"cert without key", func(f *Config) { f.EtcdEndpoints, f.EtcdTLSCert = "127.0.0.1:2379", pw }, "--etcd-tls-cert and --etcd-tls-key go together"},
		{"CA that is no PEM", func(f *Config) { f.EtcdEndpoints, f.EtcdTLSCA = "127.0.0.1:2379", pw }, "holds no PEM certificate"},
		{"membership without cluster", func(f *Config) { f.ClusterName, f.Membership = "", MembershipEtcd }, "need --cluster"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseCluster(base(tc.set))
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}

	c, err := parseCluster(base(func(f *Config) { f.Peers, f.AMPort = "localhost:7000, 127.0.0.1:7001", 7000 }))
	if err != nil || c.etcd != nil || len(c.peers) != 2 || c.amPort != 7000 {
		t.Fatalf("automanaged with self as localhost: %+v, %v", c, err)
	}
	c, err = parseCluster(base(func(f *Config) {
		f.EtcdEndpoints, f.EtcdPrefix, f.EtcdUsername, f.EtcdPasswordFile = "127.0.0.1:2379, https://e2:2379", "/p", "u", pw
	}))
	if err != nil || c.etcd == nil {
		t.Fatalf("etcd: %+v, %v", c, err)
	}
	if e := c.etcd; len(e.Endpoints) != 2 || e.Endpoints[1] != "https://e2:2379" || e.Prefix != "/p" ||
		e.Username != "u" || e.Password != "s3cret" || e.TLS != nil || len(c.peers) != 0 {
		t.Fatalf("etcd settings: %+v", e)
	}
}

package server

import (
	"strings"
	"testing"
)

// Neither the remote endpoint nor a cluster member starts where strangers
// could reach it without a certificate: off loopback they need mutual TLS,
// and on loopback plaintext needs the loudly named flag. (Before, a node
// served --remote-addr 0.0.0.0 in plaintext, and any peer created
// sessions and pruned the audit log.)
func TestRemoteRefusesToStartWithoutMutualTLS(t *testing.T) {
	cases := []struct {
		name string
		set  func(c *Config)
		want string
	}{
		{"every interface", func(c *Config) { c.RemoteAddr = "0.0.0.0:0" }, "mutual TLS"},
		{"loopback without the flag", func(c *Config) { c.RemoteAddr = "127.0.0.1:0" }, InsecureRemoteFlag},
		{"the flag off loopback", func(c *Config) { c.RemoteAddr = ":0"; c.RemoteInsecureLoopback = true }, "on a loopback address only"},
		{"the flag on a LAN address", func(c *Config) { c.RemoteAddr = "10.1.2.3:0"; c.RemoteInsecureLoopback = true }, "on a loopback address only"},
		{"a cluster without the flag", func(c *Config) {
			c.ClusterName, c.Peers, c.AMPort, c.Data = "c", "127.0.0.1:1", 1, "postgres://nowhere/db"
		}, "--cluster without mutual TLS"},
		{"a cluster off loopback", func(c *Config) {
			c.ClusterName, c.Peers, c.AMPort, c.Data = "c", "10.1.2.3:1", 1, "postgres://nowhere/db"
			c.RemoteAddr, c.RemoteInsecureLoopback = "10.1.2.3:0", true
		}, "on a loopback address only"},
		{"the flag alone", func(c *Config) { c.RemoteInsecureLoopback = true }, "needs --remote-addr or --cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Data = "memory:" + strings.ReplaceAll(t.Name(), "/", "-")
			cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", ""
			tc.set(cfg)
			n, err := Start(cfg, quietLog())
			if err == nil {
				n.Shutdown()
				t.Fatal("the node started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestRemoteSecurityAllows(t *testing.T) {
	for _, tc := range []struct {
		host string
		cfg  Config
	}{
		{"127.0.0.1", Config{RemoteInsecureLoopback: true}},
		{"::1", Config{RemoteInsecureLoopback: true}},
		{"localhost", Config{RemoteInsecureLoopback: true}},
		{"0.0.0.0", Config{RemoteCert: "c", RemoteKey: "k", RemoteCA: "ca"}},
		{"10.1.2.3", Config{RemoteCert: "c", RemoteKey: "k", RemoteCA: "ca", ClusterName: "c"}},
	} {
		if err := checkRemoteSecurity(&tc.cfg, tc.host); err != nil {
			t.Errorf("%s with %+v: %v", tc.host, tc.cfg, err)
		}
	}
}

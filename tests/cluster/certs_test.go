package cluster_test

import (
	"testing"

	"github.com/agentstate/agentstate/tests/testpki"
)

// clusterPKI is a throwaway CA for a cluster on loopback: the members'
// certificate (valid for 127.0.0.1, as server and as client: members dial
// each other) and a rogue one from another CA (see testpki).
type clusterPKI struct {
	CA                  string
	MemberCert, Key     string
	RogueCert, RogueKey string
}

func newClusterPKI(t *testing.T) *clusterPKI {
	t.Helper()
	a := testpki.New(t)
	p := &clusterPKI{CA: a.CA}
	p.MemberCert, p.Key = a.Leaf(t, "member")
	p.RogueCert, p.RogueKey = a.RogueLeaf(t, "rogue")
	return p
}

// mtlsFlags are the serve flags of a member with the cluster's certificate.
func (p *clusterPKI) mtlsFlags() []string {
	return []string{"--remote-tls-cert", p.MemberCert, "--remote-tls-key", p.Key, "--remote-tls-ca", p.CA}
}

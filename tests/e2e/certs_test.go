package e2e_test

import (
	"testing"

	"github.com/agentstate/agentstate/tests/testpki"
)

// pki is the files the tests pass to the node: a CA, the node's certificate,
// a peer's, and a rogue peer's signed by another CA (see testpki).
type pki struct {
	CA                  string
	NodeCert, NodeKey   string
	PeerCert, PeerKey   string
	RogueCert, RogueKey string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	a := testpki.New(t)
	p := &pki{CA: a.CA}
	p.NodeCert, p.NodeKey = a.Leaf(t, "node")
	p.PeerCert, p.PeerKey = a.Leaf(t, "peer")
	p.RogueCert, p.RogueKey = a.RogueLeaf(t, "rogue")
	return p
}

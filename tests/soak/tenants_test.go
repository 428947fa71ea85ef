package soak

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"google.golang.org/grpc"
)

// The soak's two principals (issue 28): every attack runs as hostile,
// the checker's load and its tail as honest. Both may do anything to
// every namespace: the hostile clients are authorized ones that
// misbehave, so their requests reach the node's admission and take its
// budgets, which are apportioned by principal.
const (
	honestToken  = "soak-honest-0123456789"
	hostileToken = "soak-hostile-0123456789"
)

// writeIdentities writes the node's --auth-file for the two principals
// into dir and returns its path.
func writeIdentities(dir string) (string, error) {
	hash := func(tok string) string {
		h := sha256.Sum256([]byte(tok))
		return hex.EncodeToString(h[:])
	}
	type grant struct {
		Namespace string `json:"namespace"`
		Role      string `json:"role"`
	}
	type principal struct {
		Name        string   `json:"name"`
		TokenSHA256 []string `json:"token_sha256"`
		Operator    bool     `json:"operator"`
		Grants      []grant  `json:"grants"`
	}
	all := []grant{{Namespace: "*", Role: "admin"}}
	b, err := json.Marshal(map[string][]principal{"principals": {
		// The checker verifies the audit chain: an operator's read.
		{Name: "honest", TokenSHA256: []string{hash(honestToken)}, Operator: true, Grants: all},
		{Name: "hostile", TokenSHA256: []string{hash(hostileToken)}, Grants: all},
	}})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "identities.json")
	return path, os.WriteFile(path, b, 0o600)
}

// honestTail is the honest principal's change feed, from the moment it
// starts: it counts the entries it receives until ctx ends, and keeps the
// error that ended it otherwise.
type honestTail struct {
	entries atomic.Int64
	done    chan struct{}
	err     error
}

func tailChanges(ctx context.Context, conn *grpc.ClientConn) (*honestTail, error) {
	st, err := feedv1.NewFeedServiceClient(conn).TailChanges(ctx, &feedv1.TailChangesRequest{FromNow: true})
	if err != nil {
		return nil, err
	}
	h := &honestTail{done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			ev, err := st.Recv()
			if err != nil {
				if ctx.Err() == nil {
					h.err = err
				}
				return
			}
			if ev.GetEntry() != nil {
				h.entries.Add(1)
			}
		}
	}()
	return h, nil
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentstate/agentstate/node/bench"
	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
	"github.com/agentstate/agentstate/tests/checker"
)

// TestBenchCluster runs node bench cluster with 1 and 2 members (this
// binary as the members) on the server of AGENTSTATE_TEST_POSTGRES, for an
// audited kind (the one with the chain lock), the trail partitioned into
// 16 chains (the members' DSN carries audit_chains): every write is answered one way or the
// other, each member's CPU and the database's commits and WAL are counted (the
// WAL is the server's, which other tests may share, so only its presence),
// and each member wrote a CPU profile. Without the server it skips (fails
// under CI). The members run a node built without the race detector, as
// tests/cluster's do: Proto.Actor's cluster races inside itself under it.
func TestBenchCluster(t *testing.T) {
	base := pgtest.Base(t)
	nodeBin := filepath.Join(t.TempDir(), "node")
	if err := checker.BuildNode(t.Context(), nodeBin, false); err != nil {
		t.Fatal(err)
	}
	profiles := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "cluster", "--postgres", base, "--node-binary", nodeBin, "--members", "1,2", "--kind", "create",
		"--ops", "64", "--callers", "8", "--sessions", "4", "--audit-chains", "16", "--profile-dir", profiles, "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rs []bench.ClusterResult
	if err := json.Unmarshal(out.Bytes(), &rs); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(rs) != 2 {
		t.Fatalf("results: %+v", rs)
	}
	for i, r := range rs {
		want := 1 + i%2
		if r.Members != want || len(r.MemberCPUPerOp) != want || r.Ops < 1 || r.Ops+r.Errors != 64 {
			t.Errorf("run %d: %+v", i, r)
		}
		for m, c := range r.MemberCPUPerOp {
			if c <= 0 {
				t.Errorf("%s, %d members: member %d has no CPU counted", r.Kind, r.Members, m)
			}
		}
		if r.CommitsPerOp <= 0 || r.WALBytesPerOp <= 0 {
			t.Errorf("%s, %d members: commits %v, WAL %v per write", r.Kind, r.Members, r.CommitsPerOp, r.WALBytesPerOp)
		}
	}
	runs, err := filepath.Glob(filepath.Join(profiles, "create-2-*", "member-1.pprof"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("no profile of member 1 of the 2-member run: %v %v", runs, err)
	}
	if fi, err := os.Stat(runs[0]); err != nil || fi.Size() == 0 {
		t.Fatalf("profile %s: %v", runs[0], err)
	}

	// Routed to owners: every append is answered, none falls back, and a
	// write goes straight to an owner only after some member named one.
	// Whether a run this short sees a hint at all depends on how soon the
	// members' gossip carries their gRPC addresses (tests/cluster's
	// TestClusterOwnerHeader waits for that and asserts the hints;
	// node/client's route tests assert that hints are followed).
	out.Reset()
	errOut.Reset()
	code = run([]string{"bench", "cluster", "--postgres", base, "--node-binary", nodeBin, "--members", "2", "--kind", "append",
		"--ops", "64", "--callers", "8", "--sessions", "4", "--route-to-owner", "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("--route-to-owner: exit %d: %s", code, errOut.String())
	}
	rs = nil
	if err := json.Unmarshal(out.Bytes(), &rs); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(rs) != 1 || !rs[0].RouteToOwner || rs[0].Ops != 64 || rs[0].Errors != 0 || rs[0].FellBack != 0 ||
		(rs[0].Routed > 0 && rs[0].Hinted == 0) || rs[0].Routed > int64(rs[0].Ops) || rs[0].Hinted > int64(rs[0].Ops) {
		t.Fatalf("--route-to-owner: %+v", rs)
	}
}

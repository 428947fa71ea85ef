package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/tests/checker"
	pacluster "github.com/asynkron/protoactor-go/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// registered returns the members registered in etcd under the default
// prefix for cluster E, as the cluster sees them.
func registered(t *testing.T, ctx context.Context, endpoint string) pacluster.Members {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "/agentstate/E/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out pacluster.Members
	for _, kv := range resp.Kvs {
		var n struct {
			ID    string   `json:"id"`
			Host  string   `json:"host"`
			Port  int32    `json:"port"`
			Kinds []string `json:"kinds"`
		}
		if err := json.Unmarshal(kv.Value, &n); err != nil {
			t.Fatalf("%s: %v", kv.Key, err)
		}
		out = append(out, &pacluster.Member{Id: n.ID, Host: n.Host, Port: n.Port, Kinds: n.Kinds})
	}
	return out
}

// newMember returns the address of the one member in after and not before.
func newMember(t *testing.T, before, after pacluster.Members) string {
	t.Helper()
	old := map[string]bool{}
	for _, m := range before {
		old[m.Address()] = true
	}
	var added []string
	for _, m := range after {
		if !old[m.Address()] {
			added = append(added, m.Address())
		}
	}
	if len(added) != 1 {
		t.Fatalf("members registered in etcd: %d before, %d after, new: %v; want one new", len(before), len(after), added)
	}
	return added[0]
}

// createVia creates session id through m and records it.
func createVia(t *testing.T, ctx context.Context, m *member, ledger *checker.Ledger, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := sessionv1.NewSessionServiceClient(m.conn).Create(ctx, &sessionv1.CreateSessionRequest{
		SessionId: id, ActorName: "checker", Namespace: "checker", MetadataJson: "{}"}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("create %s via %s: %v", id, m.GRPCAddr, err)
	}
	ledger.SessionCreated(id)
}

// byHand is the ledger's client id of appendVia (the load's are small).
const byHand = 1000

// appendVia appends one message to session through m and records it.
func appendVia(t *testing.T, ctx context.Context, m *member, ledger *checker.Ledger, session string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	id := ids.New()
	// Content unique per message: the checker reads equal content as a duplicate.
	tr := checker.Turn{Session: session, Messages: []checker.Msg{{ID: id, Role: sessionv1.Role_ROLE_USER, Content: "by hand " + id}}}
	ledger.AppendSent(tr)
	resp, err := sessionv1.NewSessionServiceClient(m.conn).Append(ctx, tr.Request(), grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("append to %s via %s: %v", session, m.GRPCAddr, err)
	}
	ledger.AppendAcked(byHand, tr, false, resp)
}

// waitMetric polls m's sample until ok holds (at most 30 s) and returns it.
func waitMetric(t *testing.T, ctx context.Context, m *member, sample string, ok func(float64) bool) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		v := metricOf(t, m, sample)
		if ok(v) {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s of %s stayed %v: %v", sample, m.HTTPAddr, v, ctx.Err())
		case <-tick.C:
		}
	}
}

// waitReadyz polls m's /readyz until it answers code (at most 30 s) and
// returns its body.
func waitReadyz(t *testing.T, ctx context.Context, m *member, code int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got, body := readyz(t, m)
		if got == code {
			return body
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/readyz of %s stayed %d %q: %v", m.HTTPAddr, got, body, ctx.Err())
		case <-tick.C:
		}
	}
}

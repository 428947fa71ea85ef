package sqlite

import (
	"context"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// createPairsPerTx is how many new sessions one transaction of
// BenchmarkCreate creates, and how many first appends it carries: node
// bench's "new" workload (64 callers, each creating a session and then
// appending its first message) commits about 20 of each per transaction.
const createPairsPerTx = 20

// BenchmarkCreate is the store's share of issue 17's "new" workload: each
// transaction creates createPairsPerTx sessions, each folded into its
// owner's activation with its session_created audit entry as the session
// actor sends it, and appends the first message of each session the
// previous transaction created. cpu-ns/row is per create + first append.
// The commands are built before the clock starts.
func BenchmarkCreate(b *testing.B) {
	_, w := benchStore(b)
	ctx := context.Background()
	batches := make([][]persistence.Command, b.N+1)
	var prev []string
	for i := range batches {
		now := time.Now().UTC()
		ts := timestamppb.New(now)
		cur := make([]string, createPairsPerTx)
		batch := make([]persistence.Command, 0, 2*createPairsPerTx)
		for k := range cur {
			cur[k] = ids.New()
			s := &sessionv1.Session{SessionId: cur[k], ActorName: "bench", State: sessionv1.SessionState_SESSION_STATE_ACTIVE,
				TokenUsage: &sessionv1.TokenUsage{}, CreatedAt: ts, UpdatedAt: ts}
			e := &auditv1.AuditEntry{EventId: ids.New(), EventType: "session_created", SessionId: cur[k], ActorName: "bench",
				DetailsJson: `{"automation":"","namespace":""}`, CreatedAt: ts}
			batch = append(batch, &persistence.Activate{Kind: persistence.OwnerSession, ID: cur[k],
				Then: &persistence.CreateSession{Session: s, Audit: []*auditv1.AuditEntry{e}}})
		}
		for _, id := range prev {
			batch = append(batch, &persistence.AppendMessages{Epoch: 1, SessionID: id, UpdatedAt: now,
				Turns: []persistence.Turn{{Messages: []*sessionv1.Message{{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER,
					Content: benchContent, MetadataJson: "{}", CreatedAt: ts}}}}})
		}
		batches[i], prev = batch, cur
	}
	// The first transaction has no appends: untimed.
	if _, err := w.Apply(ctx, batches[0]); err != nil {
		b.Fatal(err)
	}
	t := startTimer(b)
	for i := 1; i <= b.N; i++ {
		res, err := w.Apply(ctx, batches[i])
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	t.report(createPairsPerTx)
}

package checker

import (
	"context"
	"fmt"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc"
)

// Setup creates the sessions, and those of the keyed batches and of the
// replacements when the load sends them.
func (ld *Load) Setup(ctx context.Context) error {
	var err error
	ld.sessionIDs, err = ld.createSessions(ctx, "session", "checker", ld.cfg.Sessions,
		func(i int) string { return fmt.Sprintf(`{"index":%d}`, i) }, ld.ledger.SessionCreated)
	if err == nil && ld.cfg.KeyedEvery > 0 {
		ld.keyedIDs, err = ld.createSessions(ctx, "keyed session", "checker-keyed", ld.cfg.KeyedSessions,
			nil, ld.ledger.KeyedSessionCreated)
	}
	if err == nil && ld.cfg.SuffixEvery > 0 {
		// One per client, for its replacements.
		ld.suffixIDs, err = ld.createSessions(ctx, "suffix session", "checker-suffix", ld.cfg.Clients,
			nil, ld.ledger.SuffixSessionCreated)
	}
	return err
}

// createSessions creates n sessions of actor, each with a client-chosen
// id so that a retried Create is idempotent, in the load's namespace (a
// tenant's principal may write only its own); meta, when not nil, gives
// the i-th its metadata. created records each as it is acknowledged.
func (ld *Load) createSessions(ctx context.Context, what, actor string, n int, meta func(i int) string, created func(id string)) ([]string, error) {
	at := 0
	out := make([]string, 0, n)
	for i := range n {
		req := &sessionv1.CreateSessionRequest{SessionId: ids.New(), ActorName: actor, Namespace: ld.cfg.Namespace}
		if meta != nil {
			req.MetadataJson = meta(i)
		}
		err := ld.call(ctx, "create "+what, &at, true, nil, func(ctx context.Context, conn int, ready grpc.CallOption) error {
			_, err := ld.targets[conn].sessions.Create(ctx, req, ready)
			return err
		})
		if err != nil {
			return out, err
		}
		created(req.SessionId)
		out = append(out, req.SessionId)
	}
	return out, nil
}

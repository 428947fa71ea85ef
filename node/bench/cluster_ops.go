package bench

import (
	"context"
	"fmt"
	"strconv"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc"
)

// clusterOp is one write kind of a cluster run: setup makes the sessions
// or plans it writes to (untimed), write makes the i-th write on conn.
type clusterOp struct {
	setup func(ctx context.Context, conns []*grpc.ClientConn, n int) ([]string, error)
	write func(ctx context.Context, conn *grpc.ClientConn, targets []string, i int) error
}

var clusterOps = map[string]clusterOp{
	"append": {setup: clusterSessions, write: func(ctx context.Context, conn *grpc.ClientConn, t []string, i int) error {
		_, err := sessionv1.NewSessionServiceClient(conn).Append(ctx, &sessionv1.AppendRequest{SessionId: t[i%len(t)],
			Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: clusterContent, MessageId: ids.New()}}})
		return err
	}},
	"create": {setup: noTargets, write: func(ctx context.Context, conn *grpc.ClientConn, _ []string, _ int) error {
		_, err := sessionv1.NewSessionServiceClient(conn).Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "bench"})
		return err
	}},
	"state": {setup: clusterSessions, write: func(ctx context.Context, conn *grpc.ClientConn, t []string, i int) error {
		_, err := sessionv1.NewSessionServiceClient(conn).UpdateState(ctx, &sessionv1.UpdateStateRequest{SessionId: t[i%len(t)],
			StateDelta: &sessionv1.StateDelta{SetJson: map[string]string{"step": strconv.Itoa(i)}}})
		return err
	}},
	// A session's state change that changes a shared scope (one per
	// session here, so callers do not contend on one scope row).
	"scope": {setup: clusterSessions, write: func(ctx context.Context, conn *grpc.ClientConn, t []string, i int) error {
		_, err := sessionv1.NewSessionServiceClient(conn).UpdateState(ctx, &sessionv1.UpdateStateRequest{SessionId: t[i%len(t)],
			ScopeDeltas: []*sessionv1.ScopeDelta{{Scope: "app:bench-" + strconv.Itoa(i%len(t)),
				Delta: &sessionv1.StateDelta{SetJson: map[string]string{"step": strconv.Itoa(i)}}}}})
		return err
	}},
	"plan": {setup: clusterPlans, write: func(ctx context.Context, conn *grpc.ClientConn, t []string, i int) error {
		_, err := planv1.NewPlanServiceClient(conn).RecordError(ctx, &planv1.RecordErrorRequest{PlanId: t[i%len(t)],
			Phase: planv1.Phase_PHASE_EXECUTE, StepId: "step-" + strconv.Itoa(i/len(t)), ErrorType: "TimeoutError",
			Message: "timed out", ActorName: "bench", RecordId: ids.New()})
		return err
	}},
}

// clusterContent is an append's content: DefaultMessageBytes bytes.
var clusterContent = fmt.Sprintf("%0*d", DefaultMessageBytes, 0)

func noTargets(context.Context, []*grpc.ClientConn, int) ([]string, error) { return nil, nil }

// clusterSessions creates n sessions through the members in turn, so
// their owners spread over the members as callers' sessions would.
func clusterSessions(ctx context.Context, conns []*grpc.ClientConn, n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		r, err := sessionv1.NewSessionServiceClient(conns[i%len(conns)]).Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "bench"})
		if err != nil {
			return nil, err
		}
		out[i] = r.GetSession().GetSessionId()
	}
	return out, nil
}

// clusterPlans names n plans; a plan exists from its first record.
func clusterPlans(_ context.Context, _ []*grpc.ClientConn, n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		out[i] = ids.New()
	}
	return out, nil
}

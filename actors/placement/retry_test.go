package placement_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/placement"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/emptypb"
)

// scripted is a cluster kind whose activations answer a request
// *commonv1.Error{Code: c} with that error the first failures times they
// see it, and with *emptypb.Empty (a response) after; a request with
// message "ok" is answered *emptypb.Empty at once, other requests with code
// UNSPECIFIED never. received counts requests per identity.
type scripted struct {
	failures int
	mu       sync.Mutex
	received map[string]int
}

func (s *scripted) kind() *cluster.Kind {
	return cluster.NewKind("scripted", actor.PropsFromFunc(func(ctx actor.Context) {
		id := ctx.Self().Id
		if ci := cluster.GetClusterIdentity(ctx); ci != nil {
			id = ci.Identity
		}
		m, ok := ctx.Message().(*commonv1.Error)
		if !ok {
			return
		}
		s.mu.Lock()
		s.received[id]++
		n := s.received[id]
		s.mu.Unlock()
		switch {
		case m.GetMessage() == "ok":
			ctx.Respond(&emptypb.Empty{})
		case m.GetCode() == commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED:
		case n <= s.failures:
			ctx.Respond(m)
		default:
			ctx.Respond(&emptypb.Empty{})
		}
	}))
}

func (s *scripted) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received[id]
}

// The Router retries only what is known to have done nothing: an owner's
// UNAVAILABLE is retried until it succeeds; an owner's OUTCOME_UNKNOWN,
// and a request sent but never answered, reach the caller after one
// attempt as OUTCOME_UNKNOWN.
func TestRouterRetriesUnavailableButNotOutcomeUnknown(t *testing.T) {
	s := &scripted{failures: 2, received: map[string]int{}}
	m := startOneMember(t, s.kind())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := ids.New()
	before := m.router.Retries()
	resp, err := m.router.Route(ctx, "scripted", id, &commonv1.Error{Code: errs.UnavailableCode, Message: "fenced"})
	if err != nil {
		t.Fatalf("UNAVAILABLE twice, then OK: Route = %v", err)
	}
	if _, isOK := resp.(*emptypb.Empty); !isOK || s.count(id) != 3 || m.router.Retries()-before != 2 {
		t.Fatalf("UNAVAILABLE twice, then OK: %d requests, %d retries; want 3 and 2", s.count(id), m.router.Retries()-before)
	}

	id = ids.New()
	before = m.router.Retries()
	_, err = m.router.Route(ctx, "scripted", id, &commonv1.Error{Code: errs.OutcomeUnknownCode, Message: "commit lost"})
	if !errors.Is(err, errs.ErrOutcomeUnknown) || s.count(id) != 1 || m.router.Retries() != before {
		t.Fatalf("OUTCOME_UNKNOWN: Route = %v after %d requests, %d retries; want OUTCOME_UNKNOWN after 1, no retry",
			err, s.count(id), m.router.Retries()-before)
	}

	// Sent, never answered: the attempt times out, and the request may
	// have been applied.
	short := placement.NewRouter(placement.RouterConfig{AttemptTimeout: 200 * time.Millisecond})
	short.Bind(m.cluster)
	id = ids.New()
	_, err = short.Route(ctx, "scripted", id, &commonv1.Error{})
	if !errors.Is(err, errs.ErrOutcomeUnknown) || s.count(id) != 1 || short.Retries() != 0 {
		t.Fatalf("no answer: Route = %v after %d requests, %d retries; want OUTCOME_UNKNOWN after 1, no retry",
			err, s.count(id), short.Retries())
	}
}

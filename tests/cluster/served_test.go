package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/tests/checker"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// servedBound is how soon after a member's death every session must be
// served again (p99 over a run). The mechanism's own cost is far below it:
// a graceful leave deletes the member's registration before it stops, and
// a killed member's is deleted by the first peer whose connection to it
// broke and whose probes were refused (actors/placement's peerReaper, two
// probes 50 ms apart), so the others' etcd watch rebalances within a few
// hundred milliseconds and the new owner activates the session from the
// store. The rest is margin for a loaded two-core CI machine. Without the
// reaper a killed member's sessions wait for its 3 s etcd lease to expire,
// which this bound rejects.
const servedBound = 2 * time.Second

// probeGiveUp ends a probe that is not acknowledged at all; the figures of
// slower ones are still reported (and fail the bound).
const probeGiveUp = 30 * time.Second

// served collects how long sessions went unserved after members died.
type served struct {
	mu      sync.Mutex
	samples []time.Duration
}

// probe appends one message to every session (of namespace; "" for the
// load's default) right after a member died at
// t0, through the live members in turn (the next one after a failed
// attempt), and records for each session how long after t0 it was
// acknowledged. It is the test's own client, not the load's: the load's
// clients pick sessions at random, so their first acknowledgement after a
// death measures their sampling as well as the cluster. A failed attempt is
// retried 20 ms later (pacing, so that an UNAVAILABLE answered at once does
// not spin); each attempt is recorded in the ledger like the load's.
func (s *served) probe(ctx context.Context, t0 time.Time, live []*member, ledger *checker.Ledger, namespace string, sessions []string) (time.Duration, error) {
	ctx, cancel := context.WithDeadline(ctx, t0.Add(probeGiveUp))
	defer cancel()
	took := make([]time.Duration, len(sessions))
	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	for i, sid := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			took[i], errs[i] = probeOne(ctx, t0, live, ledger, checker.Turn{Session: sid, Namespace: namespace}, i)
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("session %s not served again: %w", sessions[i], err)
		}
		s.samples = append(s.samples, took[i])
	}
	return slices.Max(took), nil
}

// probeOne sends tr (its session and namespace; the message is made here)
// until acknowledged.
func probeOne(ctx context.Context, t0 time.Time, live []*member, ledger *checker.Ledger, tr checker.Turn, at int) (time.Duration, error) {
	id := ids.New()
	sid := tr.Session
	tr.Messages = []checker.Msg{{ID: id, Role: sessionv1.Role_ROLE_USER, Content: "probe " + id}}
	var failed []codes.Code
	var last error
	for ctx.Err() == nil {
		m := live[at%len(live)]
		at++
		ledger.AppendSent(tr)
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := sessionv1.NewSessionServiceClient(m.conn).Append(actx, tr.Request())
		cancel()
		if err == nil {
			took := time.Since(t0)
			ledger.RetryAnswered("probe append to "+sid, failed, resp.GetDuplicate())
			ledger.AppendAcked(byHand, tr, false, resp)
			return took, nil
		}
		failed, last = append(failed, status.Code(err)), err
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			break
		}
	}
	return 0, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), last)
}

// Stats returns the samples' count, median, 99th percentile (nearest
// rank) and maximum.
func (s *served) stats() (n int, p50, p99, maxd time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return 0, 0, 0, 0
	}
	v := slices.Sorted(slices.Values(s.samples))
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(v))+0.999999) - 1
		return v[max(0, min(i, len(v)-1))]
	}
	return len(v), rank(0.5), rank(0.99), v[len(v)-1]
}

func (s *served) String() string {
	n, p50, p99, mx := s.stats()
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return strings.Join([]string{fmt.Sprintf("served again: %d samples (sessions x deaths)", n),
		"p50=" + r(p50), "p99=" + r(p99), "max=" + r(mx), "(bound p99 <= " + servedBound.String() + ")"}, " ")
}

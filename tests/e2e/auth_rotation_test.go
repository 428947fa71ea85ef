package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// rotatingClient appends to its session without pause, with the token in
// force (token), each append with message ids of its own, retried with
// the same ids when its outcome is unknown or the node asked it to retry.
type rotatingClient struct {
	session string
	// acked are the message ids the node acknowledged, in order.
	acked []string
	// sinceSwitch counts the appends acknowledged with the new token.
	sinceSwitch atomic.Int64
	total       atomic.Int64
	err         error
}

// retryable: the append may or may not have been stored (or was refused
// before being stored); a retry with the same ids stores it exactly once.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

func (c *rotatingClient) run(ctx context.Context, ss sessionv1.SessionServiceClient, token *atomic.Value, newToken string) {
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("%s-%06d", c.session, i)
		req := &sessionv1.AppendRequest{SessionId: c.session, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: id, MessageId: id}}}
		for {
			tok := token.Load().(string)
			_, err := ss.Append(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok), req)
			if err == nil {
				c.acked = append(c.acked, id)
				c.total.Add(1)
				if tok == newToken {
					c.sinceSwitch.Add(1)
				}
				break
			}
			if ctx.Err() != nil {
				return // the run is over; this append's outcome is not counted
			}
			if !retryable(err) {
				c.err = fmt.Errorf("append %s with token %q: %w", id, tok, err)
				return
			}
		}
	}
}

// Token rotation under load: clients append continuously while a new
// token is added (SIGHUP), the clients switch to it, and the old one is
// removed (SIGHUP). No append is refused or lost: every acknowledged one
// is stored exactly once, in order, and nothing else is; the old token is
// refused after the second reload.
func TestTokenRotationUnderLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "identities.json")
	writeFile(t, path, identities("old-token"))
	n := startNode(t, "--auth-file", path)
	ss := sessionv1.NewSessionServiceClient(n.conn())
	ctx := ctxT(t)
	as := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	hup := func() {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	const clients, per = 4, 20
	var token atomic.Value
	token.Store("old-token")
	cs := make([]*rotatingClient, clients)
	for i := range cs {
		cr, err := ss.Create(as("old-token"), &sessionv1.CreateSessionRequest{ActorName: "rotating", Namespace: "team"})
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = &rotatingClient{session: cr.GetSession().GetSessionId()}
	}
	load, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(load, ss, &token, "new-token")
		}()
	}
	// waitAll waits until every client's counter reached want (or one
	// failed: the failure is reported below).
	waitAll := func(what string, count func(*rotatingClient) int64, want int64) {
		t.Helper()
		for _, c := range cs {
			for count(c) < want {
				if ctx.Err() != nil {
					stop()
					wg.Wait()
					t.Fatalf("waiting for %s: %v (client errors: %v)", what, ctx.Err(), clientErrs(cs))
				}
				waitBriefly(ctx)
			}
		}
	}
	waitAll("appends with the old token", func(c *rotatingClient) int64 { return c.total.Load() }, per)

	replaceFile(t, path, identities("old-token", "new-token"))
	hup()
	n.waitLog("auth reloaded", 1)
	token.Store("new-token")
	waitAll("appends with the new token", func(c *rotatingClient) int64 { return c.sinceSwitch.Load() }, per)

	replaceFile(t, path, identities("new-token"))
	hup()
	n.waitLog("auth reloaded", 2)
	waitAll("appends after the old token's removal", func(c *rotatingClient) int64 { return c.sinceSwitch.Load() }, 2*per)
	stop()
	wg.Wait()
	if errs := clientErrs(cs); len(errs) > 0 {
		t.Fatalf("appends refused or lost during the rotation: %v", errs)
	}

	if _, err := ss.List(as("old-token"), &sessionv1.ListSessionsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("the old token after the second reload: %v, want UNAUTHENTICATED", err)
	}
	for _, c := range cs {
		verifyStoredOnce(t, as("new-token"), ss, c)
	}
}

func clientErrs(cs []*rotatingClient) []error {
	var errs []error
	for _, c := range cs {
		if c.err != nil {
			errs = append(errs, c.err)
		}
	}
	return errs
}

// verifyStoredOnce checks that c's session holds exactly c's acknowledged
// appends, once each, in acknowledgement order; an append cut off when
// the run stopped may have been stored after them, once at most.
func verifyStoredOnce(t *testing.T, ctx context.Context, ss sessionv1.SessionServiceClient, c *rotatingClient) {
	t.Helper()
	var stored []string
	for from := int64(0); ; {
		r, err := ss.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: c.session, FromSequence: from, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.GetMessages() {
			stored = append(stored, m.GetMessageId())
		}
		if len(r.GetMessages()) == 0 {
			break
		}
		from = r.GetNextSequence()
	}
	if len(stored) < len(c.acked) || len(stored) > len(c.acked)+1 {
		t.Fatalf("session %s stores %d messages for %d acknowledged appends", c.session, len(stored), len(c.acked))
	}
	for i, id := range c.acked {
		if stored[i] != id {
			t.Fatalf("session %s: message %d is %q, want %q (each acknowledged append once, in order)", c.session, i, stored[i], id)
		}
	}
	if len(stored) > len(c.acked) && stored[len(c.acked)] != fmt.Sprintf("%s-%06d", c.session, len(c.acked)) {
		t.Fatalf("session %s: an extra message %q, not the append cut off at the end", c.session, stored[len(c.acked)])
	}
}

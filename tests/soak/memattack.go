package soak

// The memory attacks of issue 26, as the soak runs them.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// unreadTails is issue 26's memory attack: n TailSession streams from
// sequence 0 on the hostile session (which holds the 3 MiB appends the
// node stored), all on one connection with a fixed 64 KiB receive window,
// none ever read. When the node closes the connection (a stalled tail),
// it opens the next.
func (a Attacks) unreadTails(ctx context.Context, addr string, opts []grpc.DialOption, t *Tally) {
	for ctx.Err() == nil {
		conn, err := grpc.NewClient(addr, append(slices.Clip(opts),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))...)
		if err != nil {
			t.add("tails:dial_error", 1)
			return
		}
		feeds := feedv1.NewFeedServiceClient(conn)
		cctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range a.UnreadTails {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := feeds.TailSession(cctx, &feedv1.TailSessionRequest{SessionId: a.Session})
				if err == nil {
					_, err = st.Header()
				}
				if err != nil {
					t.add("tails:"+status.Code(err).String(), 1)
					return
				}
				t.add("tails:opened", 1)
				<-cctx.Done() // never read
			}()
		}
		// The node ends the stalled tails by closing the connection:
		// wait for that (or the attack's end), then open the next.
		ready := false
		for st := conn.GetState(); ctx.Err() == nil; st = conn.GetState() {
			if st == connectivity.Ready {
				ready = true
			} else if ready || st == connectivity.Shutdown {
				break
			}
			conn.WaitForStateChange(ctx, st)
		}
		if ctx.Err() == nil {
			t.add("tails:closed_by_node", 1)
		}
		cancel()
		wg.Wait()
		conn.Close()
		pause(ctx, 50*time.Millisecond)
	}
}

// deepImports is issue 26's other memory attack: Imports of 200 KiB of
// JSON nesting 100,000 levels deep, one after another on each caller.
func (a Attacks) deepImports(ctx context.Context, addr string, opts []grpc.DialOption, t *Tally) {
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.add("deep:dial_error", 1)
		return
	}
	defer conn.Close()
	api := sessionv1.NewSessionServiceClient(conn)
	req := &sessionv1.ImportSessionRequest{Data: strings.Repeat("[", 100<<10) + strings.Repeat("]", 100<<10)}
	for ctx.Err() == nil {
		_, err := api.Import(ctx, req)
		t.add("deep:"+status.Code(err).String(), 1)
		if status.Code(err) == codes.Unavailable { // the connection broke: do not spin
			pause(ctx, 50*time.Millisecond)
		}
	}
}

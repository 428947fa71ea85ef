package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// shutdown drains the node. Each phase has its own budget of timeout:
//  1. /readyz turns 503 and health reports NOT_SERVING;
//  2. the gRPC API and the remote endpoint stop accepting and let requests
//     in flight finish (append streams answer what they took, refuse the
//     rest UNAVAILABLE and end; after timeout the API cuts what is left);
//  3. the actors drain: sessions and plans answer their writes in flight,
//     then the writer commits everything it accepted;
//  4. the feeds make their final read: every tail delivers the last
//     committed change and ends (NODE_STOPPING), so the feed streams, which
//     the graceful stop of 2 waits for, end cleanly;
//  5. the HTTP server, the actor system and the database close.
//
// Phase 3 starts once every gRPC call but the feeds' finished (rpcGate),
// not when the graceful stop returned: that waits for the feed streams,
// which wait for phase 4.
func (s *server) shutdown(timeout time.Duration) error {
	s.ready.draining.Store(true)
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.api.health.Shutdown()
	// Append streams stop taking appends and end once they answered
	// those they took; GracefulStop below would otherwise wait for
	// their clients to close them, up to timeout.
	close(s.api.draining)

	var wg sync.WaitGroup
	grpcDone := make(chan struct{})
	go func() {
		defer close(grpcDone)
		stopGRPC(s.api, timeout)
	}()
	if s.remote != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.remote.Shutdown()
		}()
	}
	if s.member != nil {
		// Leaving stops this member's activations (requests they had not
		// sent to the writer are answered UNAVAILABLE, so callers retry on
		// the new owner; a write in flight is answered with its outcome)
		// and the remote. It also shuts the actor system's extensions down;
		// local actors keep running for the drain below.
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.member.Shutdown()
		}()
	}
	wg.Wait()
	s.api.gate.wait(grpcDone, timeout)
	if s.api.auditor != nil {
		s.api.auditor.close() // its entries reach the writer before it drains
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stopErr := s.node.Stop(ctx)
	if stopErr != nil {
		stopErr = fmt.Errorf("drain actors: %w", stopErr)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), timeout)
	s.feeds.Close(fctx)
	fcancel()
	<-grpcDone

	var httpErr error
	if s.http != nil {
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		httpErr = s.http.Shutdown(hctx)
		hcancel()
	}
	s.serves.Wait()
	if s.member == nil { // the member's Shutdown did it: a second one panics
		s.sys.Shutdown()
	}
	closeErr := s.store.Close()
	if closeErr != nil {
		closeErr = fmt.Errorf("close database: %w", closeErr)
	}
	return errors.Join(stopErr, httpErr, closeErr)
}

// stopGRPC stops the API gracefully, cutting it off after timeout
// (long-lived streams such as health Watch never end on their own).
func stopGRPC(api *apiServer, timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		api.srv.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		api.srv.Stop()
		<-done
	}
}

// abort undoes a partial start, in reverse order.
func (s *server) abort() {
	if s.api != nil {
		s.api.srv.Stop()
	}
	if s.remote != nil {
		s.remote.Shutdown()
	}
	if s.member != nil {
		s.member.Shutdown()
	}
	if s.node != nil {
		if err := s.node.Stop(context.Background()); err != nil {
			s.log.Error("stop actors after a failed start", "err", err)
		}
	}
	if s.feeds != nil {
		s.feeds.Close(context.Background())
	}
	if s.sys != nil && s.member == nil {
		s.sys.Shutdown()
	}
	if s.store != nil {
		s.store.Close()
	}
}

package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc"
)

// heldAudit takes Record and never answers: the node "dies" holding it.
type heldAudit struct {
	auditv1.UnimplementedAuditServiceServer
	arrived chan *auditv1.RecordRequest
}

func (h *heldAudit) Record(ctx context.Context, req *auditv1.RecordRequest) (*auditv1.RecordResponse, error) {
	h.arrived <- req
	<-ctx.Done()
	return nil, ctx.Err()
}

// A write whose node dies after receiving it exits 11 (outcome unknown:
// check, or retry with the same --event-id), not 8 (nothing stored).
func TestCLIWriteLostAfterSendExitsOutcomeUnknown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &heldAudit{arrived: make(chan *auditv1.RecordRequest, 1)}
	srv := grpc.NewServer()
	auditv1.RegisterAuditServiceServer(srv, fake)
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	defer srv.Stop()

	id := ids.New()
	var stdout, stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"audit", "record", "--addr", lis.Addr().String(), "--type", "resource_modified",
			"--event-id", id, "--sync"}, &stdout, &stderr)
	}()
	if got := <-fake.arrived; got.GetEventId() != id {
		t.Fatalf("node received event_id %q, want %q", got.GetEventId(), id)
	}
	srv.Stop() // killed before answering
	if c := <-code; c != exitOutcomeUnknown {
		t.Fatalf("exit %d, want %d (outcome unknown); stderr: %s", c, exitOutcomeUnknown, stderr.String())
	}
	if !strings.Contains(stderr.String(), `"code":"OUTCOME_UNKNOWN"`) {
		t.Fatalf("stderr %q does not say OUTCOME_UNKNOWN", stderr.String())
	}
}

// Nothing listens: the request never left, exit 8 (retry is safe).
func TestCLIWriteNeverSentExitsUnavailable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	var stdout, stderr bytes.Buffer
	c := run([]string{"audit", "record", "--addr", addr, "--type", "resource_modified", "--sync"}, &stdout, &stderr)
	if c != exitUnavailable {
		t.Fatalf("exit %d, want %d (unavailable); stderr: %s", c, exitUnavailable, stderr.String())
	}
}

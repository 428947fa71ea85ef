package client_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// auditFake answers Record as told: it signals each arrival, then holds
// the call until release (or its context ends) — the write "committed",
// its answer not yet sent — or answers err.
type auditFake struct {
	auditv1.UnimplementedAuditServiceServer
	arrived chan struct{}
	err     error
}

func (f *auditFake) Record(ctx context.Context, _ *auditv1.RecordRequest) (*auditv1.RecordResponse, error) {
	f.arrived <- struct{}{}
	if f.err != nil {
		return nil, f.err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (f *auditFake) List(ctx context.Context, _ *auditv1.ListRequest) (*auditv1.ListResponse, error) {
	f.arrived <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// serveAudit serves f on a loopback port; the returned stop kills the
// server: every connection is closed at once, no answer is sent.
func serveAudit(t *testing.T, f *auditFake) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	auditv1.RegisterAuditServiceServer(srv, f)
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), srv.Stop
}

func dialTruthful(t *testing.T, addr string) auditv1.AuditServiceClient {
	t.Helper()
	opts := append(client.OutcomeOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return auditv1.NewAuditServiceClient(conn)
}

// A write whose connection dies after it was sent — the node killed
// between its commit and its answer — may have been applied: grpc-go says
// UNAVAILABLE, which promises the opposite.
func TestWriteSentThenServerKilledIsOutcomeUnknown(t *testing.T) {
	f := &auditFake{arrived: make(chan struct{}, 1)}
	addr, kill := serveAudit(t, f)
	api := dialTruthful(t, addr)
	done := make(chan error, 1)
	go func() {
		_, err := api.Record(context.Background(), &auditv1.RecordRequest{EventType: "x"})
		done <- err
	}()
	<-f.arrived // the node has the request
	kill()
	err := <-done
	if !errors.Is(err, errs.ErrOutcomeUnknown) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v (code %v), want OUTCOME_UNKNOWN (DEADLINE_EXCEEDED): the write was sent", err, status.Code(err))
	}
}

// A read interrupted the same way changed nothing: it keeps UNAVAILABLE.
func TestReadSentThenServerKilledStaysUnavailable(t *testing.T) {
	f := &auditFake{arrived: make(chan struct{}, 1)}
	addr, kill := serveAudit(t, f)
	api := dialTruthful(t, addr)
	done := make(chan error, 1)
	go func() {
		_, err := api.List(context.Background(), &auditv1.ListRequest{})
		done <- err
	}()
	<-f.arrived
	kill()
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Fatalf("read: err = %v, want UNAVAILABLE", err)
	}
}

// Nothing listens: the request cannot have left the client.
func TestWriteNeverSentIsUnavailable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	api := dialTruthful(t, addr)
	_, err = api.Record(context.Background(), &auditv1.RecordRequest{EventType: "x"})
	if !errors.Is(err, errs.ErrUnavailable) || status.Code(err) != codes.Unavailable {
		t.Fatalf("fail-fast call to a dead address: err = %v, want UNAVAILABLE", err)
	}
	// Waiting for a connection until the deadline sends nothing either:
	// grpc-go's DEADLINE_EXCEEDED would read as "may have been applied".
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = api.Record(ctx, &auditv1.RecordRequest{EventType: "x"}, grpc.WaitForReady(true))
	if !errors.Is(err, errs.ErrUnavailable) || status.Code(err) != codes.Unavailable {
		t.Fatalf("wait-for-ready call that timed out unsent: err = %v, want UNAVAILABLE", err)
	}
}

// The node's own UNAVAILABLE (a refusal before the writer) is its answer,
// and stays what it is.
func TestNodesOwnUnavailableIsKept(t *testing.T) {
	f := &auditFake{arrived: make(chan struct{}, 1), err: errs.Unavailable("the writer is stopped")}
	addr, _ := serveAudit(t, f)
	api := dialTruthful(t, addr)
	_, err := api.Record(context.Background(), &auditv1.RecordRequest{EventType: "x"})
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "the writer is stopped" {
		t.Fatalf("err = %v, want the node's UNAVAILABLE unchanged", err)
	}
}

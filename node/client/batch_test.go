package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

func TestBatchCallersShareOneStreamAndGetTheirOwnAnswers(t *testing.T) {
	h := newHarness(t)
	const callers, each = 64, 50
	appendConcurrently(t, h.batch.Append, callers, each)
	if n := h.fake.served.Load(); n != callers*each {
		t.Fatalf("served %d, want %d", n, callers*each)
	}
	if n := h.streams.Load(); n != 1 {
		t.Fatalf("%d streams for one batch client, want 1", n)
	}
	if n := h.observed.Load(); n != callers*each {
		t.Fatalf("Observe saw %d appends, want %d", n, callers*each)
	}
	if n := h.fake.unmarked.Load(); n != 0 {
		t.Fatalf("%d appends ran without the Mark context", n)
	}
}

func TestBatchRequestErrorKeepsTheStream(t *testing.T) {
	h := newHarness(t)
	requestErrorKeepsTheStream(t, h, h.batch.Append)
	ctx := context.Background()
	if _, err := h.batch.Append(ctx, nil); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("err = %v for an append without a request, want INVALID_ARGUMENT", err)
	}
	if _, err := h.batch.Append(ctx, req("s", "c")); err != nil {
		t.Fatalf("append after refused ones: %v", err)
	}
	if n := h.streams.Load(); n != 1 {
		t.Fatalf("%d streams, want the first one kept after request errors", n)
	}
}

// On one AppendStream stream a held append holds every later one; on an
// AppendBatches stream the others go on.
func TestBatchAppendsOfOneStreamAreServedConcurrently(t *testing.T) {
	h := newHarness(t)
	held := h.held(context.Background(), h.batch.Append)
	// Served one after another, these would wait for the held one: the
	// deadline turns that into a failure instead of a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 10 {
		if _, err := h.batch.Append(ctx, req("s", fmt.Sprint(i))); err != nil {
			t.Fatalf("append %d while another is held: %v", i, err)
		}
	}
	close(h.fake.release)
	if err := <-held; err != nil {
		t.Fatalf("held append: %v", err)
	}
	if n := h.streams.Load(); n != 1 {
		t.Fatalf("%d streams, want 1", n)
	}
}

func TestBatchEndedContextKeepsTheStream(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := h.held(ctx, h.batch.Append)
	cancel()
	if err := <-done; !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want OUTCOME_UNKNOWN: the append was sent", err)
	}
	close(h.fake.release) // its outcome now arrives for nobody
	if _, err := h.batch.Append(context.Background(), req("s", "b")); err != nil {
		t.Fatal(err)
	}
	if n := h.streams.Load(); n != 1 {
		t.Fatalf("%d streams; an abandoned append must not cost the stream", n)
	}
}

func TestBatchStreamFailureFailsWaitingAppends(t *testing.T) {
	h := newHarness(t)
	done := h.held(context.Background(), h.batch.Append)
	h.srv.Stop()
	if err := <-done; !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want OUTCOME_UNKNOWN when the stream failed after the send", err)
	}
	close(h.fake.release)
}

func TestBatchOversizedAppendGoesAlone(t *testing.T) {
	h := newHarness(t)
	big := req("s", "big")
	big.Messages[0].Content = strings.Repeat("x", client.MaxBatchBytes+1)
	resp, err := h.batch.Append(context.Background(), big)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetMessages()[0].GetMessageId(); got != "big" {
		t.Fatalf("answered %q", got)
	}
	if n := h.streams.Load(); n != 1 {
		t.Fatalf("%d streams opened for an append above MaxBatchBytes, want a stream of its own", n)
	}
	if _, err := h.batch.Append(context.Background(), req("s", "small")); err != nil {
		t.Fatal(err)
	}
	if n := h.streams.Load(); n != 2 {
		t.Fatalf("%d streams after a small append, want the batch stream opened only now", n)
	}
}

func TestBatchServicePanicFailsOnlyItsAppend(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.batch.Append(ctx, req("panic", "a")); !errors.Is(err, errs.ErrInternal) {
		t.Fatalf("err = %v, want INTERNAL for an append whose service panicked", err)
	}
	if _, err := h.batch.Append(ctx, req("s", "b")); err != nil {
		t.Fatalf("append after the panic: %v", err)
	}
	if n := h.streams.Load(); n != 1 {
		t.Fatalf("%d streams, want the stream kept", n)
	}
}

// Close lets an append already sent finish: the node answers what it
// received, then ends the stream.
func TestBatchCloseAnswersWhatWasSent(t *testing.T) {
	h := newHarness(t)
	done := h.held(context.Background(), h.batch.Append)
	h.batch.Close()
	close(h.fake.release)
	if err := <-done; err != nil {
		t.Fatalf("append sent before Close: %v, want its answer", err)
	}
	if n := h.fake.served.Load(); n != 1 {
		t.Fatalf("served %d, want 1", n)
	}
}

// With grpc.WaitForReady, opening a stream waits for the connection; the
// caller's context still bounds that wait.
func TestBatchOpenEndsWithTheCallersContext(t *testing.T) {
	lis := bufconn.Listen(1 << 10) // never served: the connection is never ready
	conn, err := grpc.NewClient("passthrough:///unserved",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := client.NewBatchClient(sessionv1.NewSessionServiceClient(conn), grpc.WaitForReady(true))
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := b.Append(ctx, req("s", "a")); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("err = %v, want UNAVAILABLE once the caller's context ended", err)
	}
}

// A node that does not serve AppendBatches refuses the stream: the append
// gets that refusal (UNIMPLEMENTED), not an UNAVAILABLE that invites a
// retry forever.
func TestBatchStreamRefusedByTheNode(t *testing.T) {
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer()
	sessionv1.RegisterSessionServiceServer(srv, &fake{entered: make(chan struct{}, 1), release: make(chan struct{})})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///old",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := client.NewBatchClient(sessionv1.NewSessionServiceClient(conn))
	defer b.Close()
	if _, err := b.Append(context.Background(), req("s", "a")); status.Code(err) != codes.Unimplemented {
		t.Fatalf("err = %v (code %v), want UNIMPLEMENTED from a node without AppendBatches", err, status.Code(err))
	}
}

// An AppendBatches stream answers with its headers as soon as it is open,
// before any batch: a client that cannot see its transport send (Python's
// grpcio) holds its appends back until them, so that an append refused with
// the connection is UNAVAILABLE and only one sent after them is
// OUTCOME_UNKNOWN when its answer is lost.
func TestBatchStreamSendsHeadersAtOnce(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sessionv1.NewSessionServiceClient(h.conn).AppendBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Header(); err != nil || ctx.Err() != nil {
		t.Fatalf("no headers before the first batch: %v (context: %v)", err, ctx.Err())
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("a stream with no appends answered something")
	}
}

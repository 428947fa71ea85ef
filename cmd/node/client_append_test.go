package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/node/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

// lostAnswer serves Append by passing it to a real node, then holding the
// answer until the server is stopped: the node stored the append, and the
// client never hears so (a node killed between its commit and its answer).
type lostAnswer struct {
	sessionv1.UnimplementedSessionServiceServer
	next   sessionv1.SessionServiceClient
	stored chan *sessionv1.AppendRequest
}

func (l *lostAnswer) Append(ctx context.Context, req *sessionv1.AppendRequest) (*sessionv1.AppendResponse, error) {
	if _, err := l.next.Append(context.Background(), req); err != nil {
		return nil, err
	}
	l.stored <- req
	<-ctx.Done()
	return nil, ctx.Err()
}

// startSessionForCLI starts a node (startNodeForCLI) and creates a
// session on it; it returns the node's address and the session's id.
func startSessionForCLI(t *testing.T, req *sessionv1.CreateSessionRequest) (addr, sessionID string) {
	t.Helper()
	conn, addr := startNodeForCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created, err := sessionv1.NewSessionServiceClient(conn).Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return addr, created.GetSession().GetSessionId()
}

// cliRunner runs the CLI against the node at addr (--addr added): it
// fails the test unless the exit code is want, and returns stdout.
func cliRunner(t *testing.T, addr string) func(want int, args ...string) string {
	return func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if c := run(append(args, "--addr", addr), &stdout, &stderr); c != want {
			t.Fatalf("%v: exit %d, want %d; stderr: %s", args, c, want, stderr.String())
		}
		return stdout.String()
	}
}

// startNodeForCLI runs a node on a fresh SQLite file and returns its gRPC
// client connection and address.
func startNodeForCLI(t *testing.T) (*grpc.ClientConn, string) {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Data = t.TempDir() + "/agentstate.db"
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", ""
	cfg.ShutdownTimeout = 10 * time.Second
	log, err := server.NewLogger(io.Discard, "text", "error")
	if err != nil {
		t.Fatal(err)
	}
	n, err := server.Start(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, n.GRPCAddr()
}

// An append whose answer was lost exits 11 and names the ids its messages
// were sent with, chosen before the first attempt; the retry with those
// ids stores nothing more and answers the original sequences.
func TestCLIAppendRetriedWithItsIDsStoresOnce(t *testing.T) {
	conn, nodeAddr := startNodeForCLI(t)
	api := sessionv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created, err := api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	sid := created.GetSession().GetSessionId()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := &lostAnswer{next: api, stored: make(chan *sessionv1.AppendRequest, 1)}
	srv := grpc.NewServer()
	sessionv1.RegisterSessionServiceServer(srv, front)
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	defer srv.Stop()

	turn := []string{"--message", "user=what changed?", "--message", "assistant=two files"}
	var stdout, stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(append([]string{"session", "append", "--addr", lis.Addr().String(), "--session", sid}, turn...), &stdout, &stderr)
	}()
	sent := <-front.stored
	var sentIDs []string
	for _, m := range sent.GetMessages() {
		if err := ids.Check("message_id", m.GetMessageId()); err != nil {
			t.Fatalf("the CLI sent a message without its own id: %v", err)
		}
		sentIDs = append(sentIDs, m.GetMessageId())
	}
	srv.Stop() // the answer is lost
	if c := <-code; c != exitOutcomeUnknown {
		t.Fatalf("exit %d, want %d (outcome unknown); stderr: %s", c, exitOutcomeUnknown, stderr.String())
	}
	var failed struct {
		Error struct {
			Code       string   `json:"code"`
			MessageIDs []string `json:"message_ids"`
		} `json:"error"`
	}
	if err := json.Unmarshal(stderr.Bytes(), &failed); err != nil || failed.Error.Code != "OUTCOME_UNKNOWN" {
		t.Fatalf("stderr %q: %v; want an OUTCOME_UNKNOWN error", stderr.String(), err)
	}
	if !slices.Equal(failed.Error.MessageIDs, sentIDs) {
		t.Fatalf("the error names message ids %q, the CLI sent %q", failed.Error.MessageIDs, sentIDs)
	}

	// The retry, with the printed ids, straight to the node.
	args := append([]string{"session", "append", "--addr", nodeAddr, "--session", sid}, turn...)
	for _, id := range failed.Error.MessageIDs {
		args = append(args, "--message-id", id)
	}
	stdout.Reset()
	stderr.Reset()
	if c := run(args, &stdout, &stderr); c != exitOK {
		t.Fatalf("retry: exit %d; stderr: %s", c, stderr.String())
	}
	var again sessionv1.AppendResponse
	if err := protojson.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &again); err != nil {
		t.Fatalf("retry printed %q: %v", stdout.String(), err)
	}
	if !again.GetDuplicate() || len(again.GetMessages()) != 2 || again.GetMessages()[0].GetSequence() != 0 {
		t.Fatalf("retry printed %v, want a duplicate answering sequences 0 and 1", &again)
	}
	msgs, err := api.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid})
	if err != nil || len(msgs.GetMessages()) != 2 {
		t.Fatalf("the session holds %d messages (%v), want the turn once (2)", len(msgs.GetMessages()), err)
	}
}

// --message-id gives one id per message, or none; with --file the ids are
// the file's.
func TestCLIAppendMessageIDFlags(t *testing.T) {
	sid := ids.New()
	turn := t.TempDir() + "/turn.json"
	if err := os.WriteFile(turn, []byte(`[{"role":"user","content":"a"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--message", "user=a", "--message", "user=b", "--message-id", ids.New()},
		{"--role", "user", "--content", "x", "--message-id", ids.New(), "--message-id", ids.New()},
		{"--file", turn, "--message-id", ids.New()},
	} {
		var stdout, stderr bytes.Buffer
		c := run(append([]string{"session", "append", "--addr", "127.0.0.1:1", "--session", sid}, args...), &stdout, &stderr)
		if c != exitUsage {
			t.Errorf("%q: exit %d, want %d (usage); stderr: %s", args, c, exitUsage, stderr.String())
		}
	}
}

// Nothing listens: the append never left, exit 8, and the error names the
// ids to retry it with.
func TestCLIAppendNeverSentExitsUnavailable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	id := ids.New()
	var stdout, stderr bytes.Buffer
	c := run([]string{"session", "append", "--addr", addr, "--session", ids.New(), "--role", "user", "--content", "x", "--message-id", id}, &stdout, &stderr)
	if c != exitUnavailable {
		t.Fatalf("exit %d, want %d (unavailable); stderr: %s", c, exitUnavailable, stderr.String())
	}
	var failed struct {
		Error struct {
			Code       string   `json:"code"`
			MessageIDs []string `json:"message_ids"`
		} `json:"error"`
	}
	if err := json.Unmarshal(stderr.Bytes(), &failed); err != nil || failed.Error.Code != "UNAVAILABLE" || !slices.Equal(failed.Error.MessageIDs, []string{id}) {
		t.Fatalf("stderr %q (%v): want UNAVAILABLE naming message id %s", stderr.String(), err, id)
	}
}

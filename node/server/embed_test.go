package server_test

import (
	"context"
	"io"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/node/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A program embeds a node with DefaultConfig and Start, calls it over
// gRPC, and stops it: what it stored was committed before Shutdown
// returned, and the store is closed (a second node opens it afresh).
func TestEmbeddedNodeServesAndStops(t *testing.T) {
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
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sessions := sessionv1.NewSessionServiceClient(conn)
	created, err := sessions.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "embedded"})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := n.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	again, err := server.Start(cfg, log)
	if err != nil {
		t.Fatalf("a second node on the same file: %v", err)
	}
	defer again.Shutdown()
	conn, err = grpc.NewClient(again.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := sessionv1.NewSessionServiceClient(conn).Get(ctx, &sessionv1.GetSessionRequest{SessionId: created.GetSession().GetSessionId()})
	if err != nil || got.GetSession().GetActorName() != "embedded" {
		t.Fatalf("the session after a restart: %v, %v", got, err)
	}
}

// A configuration that cannot work is refused before anything starts.
func TestStartRefusesABadConfig(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Data = t.TempDir() + "/agentstate.db"
	cfg.Synchronous = "sometimes"
	log, _ := server.NewLogger(io.Discard, "text", "error")
	if n, err := server.Start(cfg, log); err == nil {
		n.Shutdown()
		t.Fatal("Start accepted synchronous=sometimes")
	}
}

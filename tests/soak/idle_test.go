package soak

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	nodeclient "github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/tests/checker"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
)

// TestIdleConnectionsCannotLockOutClients starts a node with 256 open
// files (issue 15: idle connections then locked out new clients and made
// the node's reads fail "too many open files") and holds 300 idle
// connections to it. The node sizes its connection bound to leave the
// database its descriptors, closes the idle connections after
// --grpc-idle-timeout, and a new client's writes and reads succeed.
func TestIdleConnectionsCannotLockOutClients(t *testing.T) {
	bin := *nodeBinary
	if bin == "" {
		bin = build.Path(t, "", "off", false)
	}
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "node-256")
	script := fmt.Sprintf("#!/bin/sh\nulimit -n 256 || exit 1\nexec %q \"$@\"\n", bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := checker.StartNode(ctx, checker.NodeConfig{Binary: wrapper, Dir: dir, Args: []string{"--grpc-idle-timeout", "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if log := n.LogTail(4000); !strings.Contains(log, "grpc_max_connections=128") {
		t.Fatalf("the node did not fit its connection bound to 256 descriptors:\n%s", log)
	}

	const idle = 300
	var closedByNode sync.WaitGroup
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", n.GRPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		closedByNode.Add(1)
		go func() {
			defer closedByNode.Done()
			for {
				if _, err := fr.ReadFrame(); err != nil {
					return
				}
			}
		}()
	}

	// A new client, while the idle connections are held open by their
	// clients: it is let in, and its writes and reads succeed.
	cc, err := nodeclient.Dial(n.GRPCAddr, nodeclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := sessionv1.NewSessionServiceClient(cc)
	created, err := api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "newcomer"}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("a new client among %d idle connections: %v\n%s", idle, err, n.LogTail(3000))
	}
	sid := created.GetSession().GetSessionId()
	for i := range 20 {
		if _, err := api.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprint("message ", i)}}}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if _, err := api.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid}); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	resp, err := http.Get("http://" + n.HTTPAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz answered %d among the idle connections", resp.StatusCode)
	}
	// Every idle connection is closed by the node in the end (the test
	// never closes them before this).
	allClosed := make(chan struct{})
	go func() {
		closedByNode.Wait()
		close(allClosed)
	}()
	select {
	case <-allClosed:
	case <-ctx.Done():
		t.Fatalf("idle connections were still open when the test's time ran out (idle timeout 1 s)")
	}
	if log := n.LogTail(1 << 20); strings.Contains(log, "too many open files") {
		t.Fatalf("the node ran out of descriptors:\n%s", log)
	}
}

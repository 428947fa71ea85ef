package placement_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/placement"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMemberWritesNothingToStdout: a member started with StartMember (the
// automanaged provider) writes nothing to stdout — the library's own HTTP
// server printed a coloured "http server started" line there — and its
// health route still answers what peers poll for: this member, with its
// kinds, so that it joins its own topology.
func TestMemberWritesNothingToStdout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	restored := false
	restore := func() {
		if !restored {
			os.Stdout = stdout
			w.Close()
			restored = true
		}
	}
	defer restore()
	printed := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		printed <- b
	}()

	var logs syncBuffer
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	amPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	self := "127.0.0.1:" + strconv.Itoa(amPort)
	m, err := placement.StartMember(sys, placement.MemberConfig{
		Name: "stdout-test", Host: "127.0.0.1", AutoManagedPort: amPort, Peers: []string{self},
		Kinds: []*cluster.Kind{cluster.NewKind("probe", actor.PropsFromFunc(func(actor.Context) {}))},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.WaitMembers(ctx, 1); err != nil {
		t.Fatalf("the member never saw itself through its health route: %v\nlogs:\n%s", err, logs.String())
	}
	resp, err := http.Get("http://" + self + "/_health")
	if err != nil {
		t.Fatal(err)
	}
	var node automanaged.NodeModel
	err = json.NewDecoder(resp.Body).Decode(&node)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := sys.GetHostPort()
	if node.ID != sys.ID || node.Address != host || node.Port != port || node.AutoManagePort != amPort ||
		node.ClusterName != "stdout-test" || !slices.Contains(node.Kinds, "probe") {
		t.Fatalf("health answered %+v; want this member (%s at %s:%d, kind probe)", node, sys.ID, host, port)
	}
	m.Shutdown()
	restore()
	if b := <-printed; len(b) > 0 {
		t.Fatalf("the member wrote to stdout: %q", b)
	}
}

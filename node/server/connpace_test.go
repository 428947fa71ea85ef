package server

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/peer"
)

// A connection marked with a principal is read only once the principal is
// no longer over its share (or paceMax passed); an unmarked one never asks.
func TestPacedConnectionWaitsWhileOverShare(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	var asked atomic.Int32
	tr := &connTracker{conns: map[string]net.Conn{}, over: func(p string) bool {
		if p != "hostile" {
			t.Errorf("asked about %q", p)
		}
		return asked.Add(1) <= 3 // over its share for three checks
	}}
	tc := &trackedConn{Conn: server, t: tr, key: "peer:1"}
	tr.conns[tc.key] = tc

	go client.Write([]byte("x"))
	buf := make([]byte, 1)
	if _, err := tc.Read(buf); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 0 {
		t.Fatalf("an unmarked connection asked %d times", asked.Load())
	}

	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: fakeAddr("peer:1")})
	tr.markPaced(ctx, "hostile")
	go client.Write([]byte("y"))
	if _, err := tc.Read(buf); err != nil || buf[0] != 'y' {
		t.Fatalf("read %q, %v", buf, err)
	}
	if n := asked.Load(); n != 4 {
		t.Fatalf("over asked %d times before the read, want 4 (three over, one under)", n)
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

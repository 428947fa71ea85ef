package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ownerHeaderSessions is how many sessions TestClusterOwnerHeader spreads
// over its two members (each owns about half; 1 in 2^15 runs finds one
// member owning none, and fails saying so).
const ownerHeaderSessions = 16

// A member that forwarded a request to the owner of its session on the
// other member names that member's gRPC address (the one the test dialled)
// in sessionv1.OwnerHeader, on an answer and on a typed error the owner
// answered alike; the owner's own answers name nobody. Members learn each
// other's address by gossip, so the test first waits until each member
// has named the other once.
func TestClusterOwnerHeader(t *testing.T) {
	ctx := runContext(t)
	dsn := database(t)
	ms := startCluster(t, ctx, dsn, "hint", "hint")
	clients := []sessionv1.SessionServiceClient{sessionv1.NewSessionServiceClient(ms[0].conn), sessionv1.NewSessionServiceClient(ms[1].conn)}

	sessions := make([]string, ownerHeaderSessions)
	for i := range sessions {
		sessions[i] = ids.New()
		if _, err := clients[0].Create(ctx, &sessionv1.CreateSessionRequest{SessionId: sessions[i], ActorName: "hint"}); err != nil {
			t.Fatalf("create %s: %v", sessions[i], err)
		}
	}
	appendVia := func(ctx context.Context, member int, sid string) (string, error) {
		var md metadata.MD
		id := ids.New()
		_, err := clients[member].Append(ctx, &sessionv1.AppendRequest{SessionId: sid,
			Messages: []*sessionv1.NewMessage{{MessageId: id, Role: sessionv1.Role_ROLE_USER, Content: "hint " + id}}}, grpc.Header(&md))
		owner, herr := ownerOf(md)
		if err == nil {
			err = herr
		}
		return owner, err
	}

	// Until gossip carried both addresses, a forwarded answer names nobody.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	named := [2]bool{}
	for at := 0; !named[0] || !named[1]; at++ {
		member, sid := at%2, sessions[(at/2)%len(sessions)]
		owner, err := appendVia(wctx, member, sid)
		if err != nil {
			if wctx.Err() != nil {
				t.Fatalf("no member named the other's address within 30 s (named: %v)", named)
			}
			t.Fatalf("append to %s via member %d: %v (named so far: %v)", sid, member, err, named)
		}
		if owner != "" {
			if owner != ms[1-member].GRPCAddr {
				t.Fatalf("member %d (%s) named %q for %s, want the other member %s", member, ms[member].GRPCAddr, owner, sid, ms[1-member].GRPCAddr)
			}
			named[member] = true
		}
		if at%(2*len(sessions)) == 2*len(sessions)-1 {
			if err := pause(wctx, 50*time.Millisecond); err != nil { // a round without a name: let gossip run
				t.Fatalf("no member named the other's address in time (named: %v): %v", named, err)
			}
		}
	}

	// Every session: exactly one member names the other, which is its owner
	// and names nobody.
	owned := [2]int{}
	for _, sid := range sessions {
		var got [2]string
		for member := range 2 {
			owner, err := appendVia(ctx, member, sid)
			if err != nil {
				t.Fatalf("append to %s via member %d: %v", sid, member, err)
			}
			got[member] = owner
		}
		switch {
		case got[0] == "" && got[1] == ms[0].GRPCAddr:
			owned[0]++
		case got[1] == "" && got[0] == ms[1].GRPCAddr:
			owned[1]++
		default:
			t.Fatalf("session %s: member 0 (%s) named %q, member 1 (%s) named %q; want exactly one naming the other",
				sid, ms[0].GRPCAddr, got[0], ms[1].GRPCAddr, got[1])
		}
	}
	if owned[0] == 0 || owned[1] == 0 {
		t.Fatalf("sessions owned per member %v: want some on each", owned)
	}

	// A typed error the owner answered names it too: appends to sessions
	// that do not exist are NOT_FOUND from their owner.
	errNamed := [2]bool{}
	for i := 0; !errNamed[0] || !errNamed[1]; i++ {
		if i == 64 {
			t.Fatalf("64 unknown sessions, a NOT_FOUND forwarded by each member not seen: %v", errNamed)
		}
		sid := ids.New()
		var got [2]string
		for member := range 2 {
			owner, err := appendVia(ctx, member, sid)
			if status.Code(err) != codes.NotFound {
				t.Fatalf("append to unknown session %s via member %d: %v, want NOT_FOUND", sid, member, err)
			}
			got[member] = owner
		}
		for member := range 2 {
			if got[member] != "" {
				if got[member] != ms[1-member].GRPCAddr || got[1-member] != "" {
					t.Fatalf("unknown session %s: member 0 named %q, member 1 %q", sid, got[0], got[1])
				}
				errNamed[member] = true
			}
		}
	}
}

// ownerOf returns the owner an answer's headers name ("" none), failing on
// more than one.
func ownerOf(md metadata.MD) (string, error) {
	switch v := md.Get(sessionv1.OwnerHeader); len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	default:
		return "", fmt.Errorf("%s named %d owners: %v", sessionv1.OwnerHeader, len(v), v)
	}
}

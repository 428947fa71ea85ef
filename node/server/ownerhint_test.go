package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/placement"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// headerStream records the headers a handler sets (grpc.SetHeader).
type headerStream struct {
	grpc.ServerTransportStream
	header metadata.MD
	calls  int
}

func (h *headerStream) SetHeader(md metadata.MD) error {
	h.calls++
	h.header = metadata.Join(h.header, md)
	return nil
}

func (h *headerStream) Method() string { return "/agentstate.session.v1.SessionService/Append" }

// The interceptor names the owner the router noted, on a success and on a
// typed error alike, and sets no header when none was noted.
func TestOwnerHintSetsTheHeaderOnlyWhenAnOwnerWasNoted(t *testing.T) {
	failed := errors.New("owner's typed error")
	cases := []struct {
		name string
		note string
		err  error
		want string
	}{
		{"forwarded", "10.0.0.2:7420", nil, "10.0.0.2:7420"},
		{"forwarded, answered an error", "10.0.0.2:7420", failed, "10.0.0.2:7420"},
		{"served here", "", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &headerStream{}
			ctx := grpc.NewContextWithServerTransportStream(context.Background(), st)
			resp, err := ownerHint(ctx, "req", &grpc.UnaryServerInfo{}, func(ctx context.Context, req any) (any, error) {
				directory.NoteOwner(ctx, tc.note)
				return "resp", tc.err
			})
			if resp != "resp" || !errors.Is(err, tc.err) {
				t.Fatalf("handler's answer changed: %v, %v", resp, err)
			}
			got := st.header.Get(sessionv1.OwnerHeader)
			switch {
			case tc.want == "" && st.calls != 0:
				t.Fatalf("headers set for a request served here: %v", st.header)
			case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
				t.Fatalf("%s = %v, want [%s]", sessionv1.OwnerHeader, got, tc.want)
			}
		})
	}
}

func TestGRPCAdvertised(t *testing.T) {
	cases := []struct{ bound, override, remoteHost, want string }{
		{"127.0.0.1:7420", "", "127.0.0.1", "127.0.0.1:7420"},
		{"0.0.0.0:7420", "", "10.0.0.1", "10.0.0.1:7420"},
		{"[::]:7420", "", "10.0.0.1", "10.0.0.1:7420"},
		{"[::]:7420", "", "fd00::1", "[fd00::1]:7420"},
		{"10.0.0.5:7420", "", "10.0.0.1", "10.0.0.5:7420"},
		{"0.0.0.0:7420", "api.example:443", "10.0.0.1", "api.example:443"},
	}
	for _, c := range cases {
		if got := grpcAdvertised(c.bound, c.override, c.remoteHost); got != c.want {
			t.Errorf("grpcAdvertised(%q, %q, %q) = %q, want %q", c.bound, c.override, c.remoteHost, got, c.want)
		}
	}
}

func TestParseClusterGRPCAdvertise(t *testing.T) {
	f := DefaultConfig()
	f.GRPCAdvertise = "10.0.0.1:7420"
	if _, err := parseCluster(f); err == nil || !strings.Contains(err.Error(), "need --cluster") {
		t.Fatalf("--grpc-advertise without --cluster: %v", err)
	}
	for addr, want := range map[string]string{
		"10.0.0.1":      "missing port",
		"10.0.0.1:0":    "want a port",
		"10.0.0.1:http": "want a port",
		":7420":         "not an unspecified one",
		"0.0.0.0:7420":  "not an unspecified one",
		"[::]:7420":     "not an unspecified one",
	} {
		f := DefaultConfig()
		f.ClusterName, f.Data, f.Peers, f.AMPort, f.GRPCAdvertise = "c", "postgres://db/x", "127.0.0.1:7000", 7000, addr
		if _, err := parseCluster(f); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--grpc-advertise %q: %v, want an error saying %q", addr, err, want)
		}
	}
	f = DefaultConfig()
	f.ClusterName, f.Data, f.Peers, f.AMPort, f.GRPCAdvertise = "c", "postgres://db/x", "127.0.0.1:7000", 7000, "api.example:443"
	if _, err := parseCluster(f); err != nil {
		t.Fatalf("--grpc-advertise api.example:443: %v", err)
	}
}

// A member's published gRPC address travels inside the gossip state, as
// an Any in a cluster.GossipRequest: the guard admits the request by its
// own type, and the value's type is one the receiver can resolve (an
// unknown type named by a peer would crash it).
func TestGossipedGRPCAddrPassesTheClusterGuard(t *testing.T) {
	v, err := anypb.New(wrapperspb.String("10.0.0.2:7420"))
	if err != nil {
		t.Fatal(err)
	}
	req := &cluster.GossipRequest{FromMemberId: "b", State: &cluster.GossipState{Members: map[string]*cluster.GossipMemberState{
		"b": {Values: map[string]*cluster.GossipKeyValue{placement.GRPCAddrKey: {SequenceNumber: 1, Value: v}}},
	}}}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var got cluster.GossipRequest
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if name := string(got.ProtoReflect().Descriptor().FullName()); !clusterTraffic(name, "gossip") {
		t.Fatalf("the guard refuses %s to gossip", name)
	}
	m, err := got.GetState().GetMembers()["b"].GetValues()[placement.GRPCAddrKey].GetValue().UnmarshalNew()
	if err != nil {
		t.Fatalf("the published address's type does not resolve: %v", err)
	}
	if s, ok := m.(*wrapperspb.StringValue); !ok || s.GetValue() != "10.0.0.2:7420" {
		t.Fatalf("published address decoded as %T %v", m, m)
	}
}

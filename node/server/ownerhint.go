package server

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/agentstate/agentstate/actors/directory"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// ownerHint is the unary interceptor of a cluster member's API: a request
// its member forwarded to the owner of its session or plan on another
// member is answered with that member's gRPC address in
// sessionv1.OwnerHeader (the router notes it: directory.NoteOwner), so the
// client can send the next requests there and save the hop. Answers of
// this member's own owners carry no header. Only a member installs it.
func ownerHint(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, sink := directory.WithOwnerSink(ctx)
	resp, err := handler(ctx, req)
	if addr := sink.Owner(); addr != "" {
		// Fails only when the headers were sent already, which a unary
		// handler does not do: the hint is then simply not given.
		_ = grpc.SetHeader(ctx, metadata.Pairs(sessionv1.OwnerHeader, addr))
	}
	return resp, err
}

// checkGRPCAdvertise validates --grpc-advertise ("" = not set): a host and
// a port clients can dial.
func checkGRPCAdvertise(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--grpc-advertise %q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("--grpc-advertise %q: want a port in 1-65535", addr)
	}
	if unspecifiedHost(host) {
		return fmt.Errorf("--grpc-advertise %q: want a host clients can dial, not an unspecified one", addr)
	}
	return nil
}

// grpcAdvertised is the gRPC address a member publishes: override
// (--grpc-advertise) when set, else bound (the listener's address) with an
// unspecified host (0.0.0.0, ::) replaced by advertisedHost, the host the
// member's remote advertises to its peers (they reach it there, so
// clients that reach them likely do too).
func grpcAdvertised(bound, override, advertisedHost string) string {
	if override != "" {
		return override
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if unspecifiedHost(host) && advertisedHost != "" {
		host = advertisedHost
	}
	return net.JoinHostPort(host, port)
}

// unspecifiedHost reports whether host names no one address ("", 0.0.0.0,
// ::): a listener's "every interface", which no client can dial.
func unspecifiedHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

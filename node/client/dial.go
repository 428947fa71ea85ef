package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/agentstate/agentstate/node/codec"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Options say how to reach a node. The zero value dials without TLS and
// without a token.
type Options struct {
	// Token is the bearer token presented on every call and stream
	// (the node's --auth-token-file); "" presents none.
	Token string
	// TLS turns on TLS, verifying the node against RootCAs (nil: the
	// system roots) under ServerName (default: the host of the address).
	// RootCAs or InsecureSkipVerify imply TLS.
	TLS        bool
	RootCAs    *x509.CertPool
	ServerName string
	// InsecureSkipVerify uses TLS without verifying the node's
	// certificate: for tests only.
	InsecureSkipVerify bool
	// Certificates are presented to a node that asks for a client
	// certificate (its --tls-client-ca): a principal of its --auth-file
	// may authenticate by one. They imply TLS.
	Certificates []tls.Certificate
	// RouteToOwner sends the requests of a session or a plan straight to
	// the cluster member that owns it once a member has named it
	// (OwnerRouter): in a cluster, it saves the members a forwarding hop
	// per request. A single node names no owner; the option then changes
	// nothing.
	RouteToOwner bool
}

// DialOptions are the grpc.DialOptions of a connection to a node: the
// transport credentials and token of o, TypedErrorOptions (errors.Is with
// the errs sentinels works on every call's error), OutcomeOptions, WindowOptions,
// and the codec forced on every call of the connection (codec.Codec: the
// generated encoders instead of reflection), so nothing process-wide is
// changed. With o.RouteToOwner, an OwnerRouter comes first; it dials the
// owners with the others, and its routes are one connection's: dial one
// connection with the options.
func DialOptions(o Options) []grpc.DialOption { return dialOptions(o, nil) }

// dialOptions are DialOptions(o) and then extra, which the OwnerRouter,
// if any, dials with too.
func dialOptions(o Options, extra []grpc.DialOption) []grpc.DialOption {
	opts := append(connOptions(o), extra...)
	if !o.RouteToOwner {
		return opts
	}
	return append([]grpc.DialOption{NewOwnerRouter(opts...).DialOption()}, opts...)
}

// connOptions are DialOptions(o) without routing.
func connOptions(o Options) []grpc.DialOption {
	var creds credentials.TransportCredentials
	if o.TLS || o.RootCAs != nil || o.InsecureSkipVerify || len(o.Certificates) > 0 {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName,
			RootCAs: o.RootCAs, InsecureSkipVerify: o.InsecureSkipVerify, Certificates: o.Certificates}
		creds = ExplainCNOnly(credentials.NewTLS(cfg), "the node")
	} else {
		creds = insecure.NewCredentials()
	}
	opts := append(TypedErrorOptions(), OutcomeOptions()...)
	opts = append(opts,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.Codec())))
	opts = append(opts, WindowOptions()...)
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(o.Token)))
	}
	return opts
}

// Receive windows of a client connection, fixed as the node's are.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// WindowOptions fix the connection's HTTP/2 receive windows (1 MiB per
// stream, 4 MiB per connection) instead of gRPC's dynamic ones, whose
// bandwidth estimator pings the node on each message received while none
// is outstanding: on an AppendBatches stream that is a ping and its
// acknowledgement, a write and a read in both processes, for every
// message of outcomes (node bench on two cores: 7-24% of the CPU per
// append over gRPC, issue 17). The cost: one stream's downloads over a
// link of long round trips are bounded by 1 MiB per round trip (10 MiB/s
// at 100 ms).
func WindowOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(connWindow)}
}

// Dial returns a connection to the node at addr (host:port) made with
// DialOptions(o) and then extra (with o.RouteToOwner, the connections to
// owners too). gRPC connects lazily: an unreachable node shows in the
// first call, as UNAVAILABLE.
func Dial(addr string, o Options, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, dialOptions(o, extra)...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	return conn, nil
}

// bearer presents a token as "authorization: Bearer <token>" on every
// call and stream, including the long-lived streams of StreamClient and
// BatchClient, which do not carry their callers' contexts' metadata.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: the node accepts a token over
// plaintext on loopback and in tests, and refusing it here would hide the
// node's own answer.
func (bearer) RequireTransportSecurity() bool { return false }

// Bearer is the per-call credential DialOptions adds for Options.Token,
// for connections dialled with options of their own.
func Bearer(token string) credentials.PerRPCCredentials { return bearer(token) }

package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	nodeclient "github.com/agentstate/agentstate/node/client"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// remoteOptions configure the Proto.Actor remote endpoint.
type remoteOptions struct {
	Addr      string // host:port; port 0 picks a free one
	Advertise string // host:port peers use to reach this node; default the bound address
	// mTLS: all three or none. The node presents Cert/Key both as a server
	// and when it dials a peer back to reply, and accepts only peers whose
	// certificate CA signed.
	Cert, Key, CA string
	MaxRecvBytes  int
	// Exposed are the actor ids peers may address.
	Exposed []string
	// Identities are the node's, as loaded at start: until the gRPC API
	// that owns them authorizes the endpoint (remoteAuthz), a peer whose
	// certificate names one of their principals is refused.
	Identities *identities
}

// The record of a cluster member's requests (sentRequests) keeps each for
// one to two minutes, far beyond any request timeout of the cluster
// (placement.DefaultRequestTimeout, the gossip's), and at most twice
// sentRequestsMax of them.
const (
	sentRequestsKeep = time.Minute
	sentRequestsMax  = 1 << 20
)

// remoteEndpoint is the running remote; Shutdown is safe to call more
// than once (the library's is not).
type remoteEndpoint struct {
	r     *remote.Remote
	guard *remoteGuard
	addr  string
	once  sync.Once
}

func startRemote(sys *actor.ActorSystem, opt remoteOptions, m *metrics, log *slog.Logger) (ep *remoteEndpoint, err error) {
	host, portStr, err := net.SplitHostPort(opt.Addr)
	if err != nil {
		return nil, fmt.Errorf("--remote-addr %q: %w", opt.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("--remote-addr %q: bad port", opt.Addr)
	}
	configOpts, guard, err := guardedRemoteConfig(sys, opt, false, m, log)
	if err != nil {
		return nil, err
	}
	r := remote.NewRemote(sys, remote.Configure(host, port, configOpts...))
	// Start panics when it cannot listen; that is a configuration error
	// here, not a crash.
	defer func() {
		if p := recover(); p != nil {
			ep, err = nil, fmt.Errorf("start remote endpoint on %s: %v", opt.Addr, p)
		}
	}()
	r.Start()
	return &remoteEndpoint{r: r, guard: guard, addr: sys.ProcessRegistry.Address}, nil
}

// guardedRemoteConfig builds the remote's options — the guard (admitting
// the cluster's own traffic when cluster is set), message size, mutual TLS
// and the advertised address — and returns the guard too.
func guardedRemoteConfig(sys *actor.ActorSystem, opt remoteOptions, cluster bool, m *metrics, log *slog.Logger) ([]remote.ConfigOption, *remoteGuard, error) {
	exposed := map[string]bool{}
	for _, id := range opt.Exposed {
		exposed[id] = true
	}
	guard := &remoteGuard{
		exposed:   exposed,
		localAddr: func() string { return sys.ProcessRegistry.Address },
		reply:     func(to *actor.PID, msg proto.Message) { sys.Root.Send(to, msg) },
		cluster:   cluster,
		m:         m,
		pending:   opt.Identities,
		log:       log,
		drops:     newWarnLimiter(log, "remote: dropped a message", warnWindow, warnBurst),
		closes:    newWarnLimiter(log, "remote: closed a stream", warnWindow, warnBurst),
	}
	if cluster {
		guard.sent = newSentRequests(sentRequestsKeep, sentRequestsMax)
	}
	sopts := append(guard.serverOptions(), grpc.MaxRecvMsgSize(opt.MaxRecvBytes))
	// The library's default dial option is plaintext; replacing the dial
	// options replaces it too.
	dopts := append(guard.dialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if opt.Cert != "" || opt.Key != "" || opt.CA != "" {
		server, client, err := mutualTLS(opt.Cert, opt.Key, opt.CA)
		if err != nil {
			return nil, nil, err
		}
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(server)))
		warnCNOnly(log, "--remote-tls-cert", server.Certificates[0])
		dopts = append(guard.dialOptions(), grpc.WithTransportCredentials(nodeclient.ExplainCNOnly(credentials.NewTLS(client), "the peer")))
	}
	configOpts := []remote.ConfigOption{remote.WithServerOptions(sopts...), remote.WithDialOptions(dopts...)}
	if opt.Advertise != "" {
		configOpts = append(configOpts, remote.WithAdvertisedHost(opt.Advertise))
	}
	return configOpts, guard, nil
}

// Shutdown stops the endpoint gracefully, once.
func (e *remoteEndpoint) Shutdown() {
	e.once.Do(func() {
		// Held while the library's Shutdown writes its reader's state:
		// see remoteGuard.quiesce.
		e.guard.quiesce.Lock()
		defer e.guard.quiesce.Unlock()
		e.r.Shutdown(true)
	})
}

// mutualTLS builds the server and client TLS configs of the remote: each
// side presents cert/key and requires the other's certificate to chain to
// ca.
func mutualTLS(certFile, keyFile, caFile string) (server, client *tls.Config, err error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, nil, fmt.Errorf("--remote-tls-cert, --remote-tls-key and --remote-tls-ca go together (mutual TLS)")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("load remote TLS key pair: %w", err)
	}
	pool, err := nodeclient.LoadCertPool(caFile)
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client, nil
}

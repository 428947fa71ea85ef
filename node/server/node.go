package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/feed"
	"github.com/agentstate/agentstate/actors/placement"
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
)

// Serve runs a node until SIGTERM or SIGINT (or parent ends), then drains
// it: the whole of `node serve` after its flags.
func Serve(parent context.Context, f *Config, log *slog.Logger) error {
	ctx, stopSignals := signal.NotifyContext(parent, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	s, err := startServer(f, log)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var runErr error
wait:
	for {
		select {
		case <-hup:
			if s.api.auth != nil {
				_ = s.reloadAuth() // it logs the outcome
			} else {
				log.Warn("SIGHUP ignored: the node runs without authentication, there is nothing to reload")
			}
		case <-ctx.Done():
			log.Info("signal received; draining")
			break wait
		case runErr = <-s.failed:
			log.Error("a listener failed; draining", "err", runErr)
			break wait
		}
	}
	stopSignals() // from now on a second signal kills the process
	if err := s.shutdown(f.ShutdownTimeout); err != nil {
		log.Error("shutdown incomplete", "err", err)
		return errors.Join(runErr, err)
	}
	log.Info("stopped cleanly")
	return runErr
}

// Node is a node started by Start, for a program that embeds one and
// stops it itself (Serve is Start, a wait for a signal, and Shutdown).
type Node struct {
	s   *server
	cfg *Config
}

// Start starts a node with cfg: on return it serves (and /readyz answers
// ready once a cluster has formed). A failed start leaves nothing running.
func Start(cfg *Config, log *slog.Logger) (*Node, error) {
	s, err := startServer(cfg, log)
	if err != nil {
		return nil, err
	}
	return &Node{s: s, cfg: cfg}, nil
}

// GRPCAddr is the address the gRPC API listens on (the port chosen when
// GRPCAddr asked for port 0).
func (n *Node) GRPCAddr() string { return n.s.grpcAddr }

// Failed delivers the error of a listener that stopped serving.
func (n *Node) Failed() <-chan error { return n.s.failed }

// Shutdown drains the node (each phase bounded by ShutdownTimeout) and
// closes its store. It must be called once.
func (n *Node) Shutdown() error { return n.s.shutdown(n.cfg.ShutdownTimeout) }

// server is one running node. Its fields are set by startServer in start
// order; shutdown takes them down in the reverse order.
type server struct {
	log    *slog.Logger
	store  persistence.Store
	sys    *actor.ActorSystem
	member *placement.Member // cluster mode; it owns the remote then
	// memberGuard screens the member's remote (cluster mode).
	memberGuard *remoteGuard
	node        *actors.Node
	feeds       *feed.Hub
	remote      *remoteEndpoint
	api         *apiServer
	http        *http.Server
	ready       *readiness
	failed      chan error // a listener's Serve returned
	serves      sync.WaitGroup
	// grpcAddr is where the API listens.
	grpcAddr string
	// stopWatch ends watchSplit (cluster mode).
	stopWatch context.CancelFunc
	// identities is where the API's principals are loaded from (again on
	// reloadAuth).
	identities identitySource
}

func startServer(f *Config, log *slog.Logger) (s *server, err error) {
	// Everything that can fail on configuration is checked before the
	// database is opened.
	source := identitySource{authFile: f.AuthFile, tokenFile: f.TokenFile}
	if f.AuthFile != "" && f.TokenFile != "" {
		return nil, fmt.Errorf("--auth-file and --auth-token-file exclude each other: give the token's principal a place in the --auth-file (every grant: operator and admin on \"*\")")
	}
	var ids *identities
	if source.enabled() {
		if ids, err = source.load(); err != nil {
			return nil, err
		}
	}
	if f.MaxRecvBytes <= 0 {
		return nil, fmt.Errorf("--max-recv-bytes must be positive")
	}
	url := f.Data
	if !isPostgres(f.Data) {
		if url, err = dataURL(f.Data, f.Synchronous); err != nil {
			return nil, err
		}
	}
	cl, err := parseCluster(f)
	if err != nil {
		return nil, err
	}
	if cl != nil {
		err = checkRemoteSecurity(f, cl.host)
	} else if f.RemoteAddr != "" {
		host, _, _ := net.SplitHostPort(f.RemoteAddr) // startRemote reports a bad address
		err = checkRemoteSecurity(f, host)
	} else if f.RemoteInsecureLoopback {
		err = fmt.Errorf("%s needs --remote-addr or --cluster", InsecureRemoteFlag)
	}
	if err != nil {
		return nil, err
	}
	conns, err := f.connLimits()
	if err != nil {
		return nil, err
	}
	streams, err := f.streamLimits()
	if err != nil {
		return nil, err
	}
	feeds, err := f.feedLimits()
	if err != nil {
		return nil, err
	}
	if f.GRPCShareRate < 0 {
		return nil, fmt.Errorf("--grpc-share-rate must not be negative")
	}
	if f.GRPCRequestBytes < 0 {
		return nil, fmt.Errorf("--grpc-request-bytes must not be negative")
	}
	if f.GRPCMaxStreamsTotal < 0 {
		return nil, fmt.Errorf("--grpc-max-streams-total must not be negative")
	}
	maxConns, err := fitConnections(f.GRPCMaxConnections, openFileLimit(), log)
	if err != nil {
		return nil, err
	}

	s = &server{log: log, ready: &readiness{}, failed: make(chan error, 3), identities: source}
	// On a failure below, undo what was started.
	defer func() {
		if err != nil {
			s.abort()
			s = nil
		}
	}()
	if s.store, err = openStore(f.Data, url); err != nil {
		return s, err
	}
	s.store.SetQuotas(ids.storeQuotas())
	reader := s.store.Reader()
	s.ready.probe = probeNotFound(func(ctx context.Context) error {
		_, err := reader.GetAudit(ctx, "00000000000000000000000000")
		return err
	})

	// The hub reads only committed data and is told of each commit by
	// the writer; it outlives the writer's drain (see shutdown).
	s.feeds = feed.New(reader, feed.Config{PollInterval: feedPollInterval(f), Logger: log.With("component", "feed")})

	actorLog := libraryLogger(log)
	s.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actorLog }))

	m := newMetrics()
	cfg := actors.Config{
		Writer: writer.Config{
			Backlog: f.Backlog, BacklogBytes: f.BacklogBytes, MaxBatchCommands: f.BatchCommands, MaxBatchBytes: f.BatchBytes,
			Observer: writeObserver{m, &s.ready.writes}, Logger: log.With("component", "writer"),
			OnCommit: s.feeds.OnCommit,
		},
		Sessions: session.Config{IdleTimeout: f.IdleTimeout, MaxLive: f.MaxLiveActors, AuditMessages: f.AuditMessages},
		Plans:    plan.Config{IdleTimeout: f.IdleTimeout, MaxLive: f.MaxLiveActors},
	}
	var router *placement.Router
	if cl != nil {
		router = placement.NewRouter(placement.RouterConfig{})
		cfg.Sessions.Router, cfg.Plans.Router = router, router
	}
	if s.node, err = actors.Start(s.sys, s.store, cfg); err != nil {
		return s, fmt.Errorf("start actors: %w", err)
	}
	m.gauges(s.node.Writer().Backlog().Pending, s.node.Writer().Backlog().PendingBytes, s.node.Sessions().ActiveActors, s.node.Plans().ActiveActors)
	m.feedGauge(s.feeds.Tails)
	if _, err = feed.StartActor(s.sys, s.feeds, feedActorName); err != nil {
		return s, err
	}
	s.ready.writes.probeWrite = probeWriteThrough(s.node.Writer())

	// The remote starts before any gRPC server of ours: it replaces gRPC's
	// global logger, which must not happen while gRPC goroutines run.
	if cl != nil {
		if s.member, s.memberGuard, err = startMember(s.sys, s.node, f, cl, router, ids, m, log.With("component", "cluster")); err != nil {
			return s, err
		}
		m.clusterGauges(s.member.Members, router.Retries, s.node.Sessions().FencedActivations, s.node.Plans().FencedActivations)
		if cl.etcd != nil {
			s.ready.membership = s.member.Membership // before /readyz serves
		}
	} else if f.RemoteAddr != "" {
		s.remote, err = startRemote(s.sys, remoteOptions{
			Addr: f.RemoteAddr, Advertise: f.RemoteAdvertise,
			Cert: f.RemoteCert, Key: f.RemoteKey, CA: f.RemoteCA,
			MaxRecvBytes: f.MaxRecvBytes,
			Exposed:      []string{s.node.Sessions().PID().Id, s.node.Plans().PID().Id, s.node.Audit().PID().Id, feedActorName},
			Identities:   ids,
		}, m, log.With("component", "remote"))
		if err != nil {
			return s, err
		}
	}

	s.api, err = newAPIServer(apiServices{Sessions: s.node.Sessions(), Plans: s.node.Plans(), Audit: s.node.Audit(),
		Feeds: s.feeds},
		apiOptions{TLSCert: f.TLSCert, TLSKey: f.TLSKey, TLSClientCA: f.TLSClientCA, Identities: ids,
			SessionNamespace: func(ctx context.Context, id string) (string, error) {
				sess, err := reader.GetSession(ctx, id)
				return sess.GetNamespace(), err
			},
			MaxRecvBytes: f.MaxRecvBytes, MarkNetwork: writer.NoWait,
			Conns: conns, Streams: streams, RequestBytes: f.GRPCRequestBytes, ShareRate: f.GRPCShareRate, StreamsTotal: f.GRPCMaxStreamsTotal, Feeds: feeds,
			OwnerHint: cl != nil},
		m, log.With("component", "grpc"))
	if err != nil {
		return s, err
	}
	if s.api.auth != nil {
		ra := newRemoteAuthz(s.api.auth, s.api.authz)
		if s.remote != nil {
			s.remote.guard.authz.p.Store(ra)
			// The remote endpoint's peers take their share of the same
			// work rate as the API's principals (not a cluster's members,
			// whose traffic is the API's, forwarded).
			s.remote.guard.pace.Store(s.api.pace)
		}
		if s.memberGuard != nil {
			s.memberGuard.authz.p.Store(ra)
		}
	}
	grpcLis, err := listenLimited(f.GRPCAddr, maxConns)
	if err != nil {
		return s, fmt.Errorf("--grpc-addr: %w", err)
	}
	s.grpcAddr = grpcLis.Addr().String()
	var grpcAdvertise string
	if s.member != nil {
		remoteHost, _, _ := net.SplitHostPort(s.member.Address())
		grpcAdvertise = grpcAdvertised(s.grpcAddr, f.GRPCAdvertise, remoteHost)
		s.member.PublishGRPCAddr(grpcAdvertise)
	}
	var httpLis net.Listener
	if f.HTTPAddr != "" {
		if httpLis, err = listenLimited(f.HTTPAddr, httpMaxConnections); err != nil {
			grpcLis.Close()
			return s, fmt.Errorf("--http-addr: %w", err)
		}
		s.http = &http.Server{Handler: newHTTPHandler(m, s.ready), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
		s.goServe(func() error {
			if err := s.http.Serve(httpLis); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http: %w", err)
			}
			return nil
		})
	}
	s.goServe(func() error {
		if err := s.api.serve(grpcLis); err != nil {
			return fmt.Errorf("grpc: %w", err)
		}
		return nil
	})
	if s.member != nil {
		s.becomeReady(f, cl, log)
	} else {
		s.ready.started.Store(true)
	}

	if w := exposedWarning(grpcLis.Addr(), f.TLSCert != "", source.enabled()); w != "" {
		log.Warn(w, "grpc_addr", grpcLis.Addr().String())
	}
	attrs := []any{"grpc_addr", grpcLis.Addr().String(), "data", redactData(f.Data),
		"tls", f.TLSCert != "", "auth", source.describe(), "grpc_max_connections", maxConns}
	if httpLis != nil {
		attrs = append(attrs, "http_addr", httpLis.Addr().String())
	}
	if s.remote != nil {
		attrs = append(attrs, "remote_addr", s.remote.addr, "remote_mtls", f.RemoteCert != "")
	}
	if s.member != nil {
		attrs = append(attrs, cl.logAttrs(f, s.member)...)
		attrs = append(attrs, "grpc_advertise", grpcAdvertise)
	}
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		attrs = append(attrs, "gomemlimit_mib", l>>20) // node serve's default or GOMEMLIMIT
	}
	log.Info("serving", attrs...)
	if !source.enabled() {
		log.Warn("the gRPC API authenticates nobody: every caller that reaches --grpc-addr may do everything; keep it on loopback, or set --auth-file or --auth-token-file",
			"grpc_addr", s.grpcAddr)
	}
	return s, nil
}

func (s *server) goServe(fn func() error) {
	s.serves.Add(1)
	go func() {
		defer s.serves.Done()
		if err := fn(); err != nil {
			s.failed <- err
		}
	}()
}

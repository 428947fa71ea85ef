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
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/feed"
	"github.com/agentstate/agentstate/actors/placement"
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/postgres"
	"github.com/agentstate/agentstate/persistence/sqlite"
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
	node   *actors.Node
	feeds  *feed.Hub
	remote *remoteEndpoint
	api    *apiServer
	http   *http.Server
	ready  *readiness
	failed chan error // a listener's Serve returned
	serves sync.WaitGroup
	// grpcAddr is where the API listens.
	grpcAddr string
	// stopWatch ends watchSplit (cluster mode).
	stopWatch context.CancelFunc
	// identities is where the API's principals are loaded from (again on
	// reloadAuth).
	identities identitySource
}

// dataURL turns --data and --synchronous into a sqlite.Open URL, creating
// the database's directory.
func dataURL(data, synchronous string) (string, error) {
	switch strings.ToLower(synchronous) {
	case "full", "normal":
	default:
		return "", fmt.Errorf("--synchronous %q: want full or normal", synchronous)
	}
	if data == "" {
		return "", fmt.Errorf("--data is empty; it names the database file, such as ./data/agentstate.db")
	}
	if !strings.HasPrefix(data, "memory:") {
		path := strings.TrimPrefix(data, "file:")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		// --data names the database file; the directory it is created in
		// (./data for make run) is no database.
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return "", fmt.Errorf("--data %s is a directory; it must name the database file, such as %s",
				data, strings.TrimSuffix(path, "/")+"/agentstate.db")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return "", fmt.Errorf("create the database directory: %w", err)
		}
	}
	if strings.Contains(data, "?") {
		return data, nil
	}
	return data + "?synchronous=" + strings.ToLower(synchronous), nil
}

// openStore opens the store --data names (url is its SQLite URL). On
// failure the Store is an untyped nil: a typed nil pointer in the
// interface would look open to abort, whose Close would then panic and
// hide the cause.
func openStore(data, url string) (persistence.Store, error) {
	if isPostgres(data) {
		octx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := postgres.Open(octx, data)
		if err != nil {
			return nil, storeOpenFailed("open PostgreSQL store", err)
		}
		return st, nil
	}
	st, err := sqlite.Open(url)
	if err != nil {
		return nil, storeOpenFailed("open database "+redactData(data), err)
	}
	return st, nil
}

// storeOpenFailed is the error of a store that could not be opened. The
// store's typed error (INTERNAL, UNAVAILABLE, ...) classifies a request's
// failure for a client; a node that cannot start has no client, so it is
// a local failure (exit 1), whose message says what and why.
func storeOpenFailed(what string, err error) error {
	return fmt.Errorf("%s: %s", what, errs.From(err).Msg)
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
		if s.member, err = startMember(s.sys, s.node, f, cl, router, m, log.With("component", "cluster")); err != nil {
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
			Conns: conns, Streams: streams, RequestBytes: f.GRPCRequestBytes, StreamsTotal: f.GRPCMaxStreamsTotal, Feeds: feeds},
		m, log.With("component", "grpc"))
	if err != nil {
		return s, err
	}
	grpcLis, err := listenLimited(f.GRPCAddr, maxConns)
	if err != nil {
		return s, fmt.Errorf("--grpc-addr: %w", err)
	}
	s.grpcAddr = grpcLis.Addr().String()
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

// shutdown drains the node. Each phase has its own budget of timeout:
//  1. /readyz turns 503 and health reports NOT_SERVING;
//  2. the gRPC API and the remote endpoint stop accepting and let requests
//     in flight finish (append streams answer what they took, refuse the
//     rest UNAVAILABLE and end; after timeout the API cuts what is left);
//  3. the actors drain: sessions and plans answer their writes in flight,
//     then the writer commits everything it accepted;
//  4. the feeds make their final read: every tail delivers the last
//     committed change and ends (NODE_STOPPING), so the feed streams, which
//     the graceful stop of 2 waits for, end cleanly;
//  5. the HTTP server, the actor system and the database close.
//
// Phase 3 starts once every gRPC call but the feeds' finished (rpcGate),
// not when the graceful stop returned: that waits for the feed streams,
// which wait for phase 4.
func (s *server) shutdown(timeout time.Duration) error {
	s.ready.draining.Store(true)
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.api.health.Shutdown()
	// Append streams stop taking appends and end once they answered
	// those they took; GracefulStop below would otherwise wait for
	// their clients to close them, up to timeout.
	close(s.api.draining)

	var wg sync.WaitGroup
	grpcDone := make(chan struct{})
	go func() {
		defer close(grpcDone)
		stopGRPC(s.api, timeout)
	}()
	if s.remote != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.remote.Shutdown()
		}()
	}
	if s.member != nil {
		// Leaving stops this member's activations (requests they had not
		// sent to the writer are answered UNAVAILABLE, so callers retry on
		// the new owner; a write in flight is answered with its outcome)
		// and the remote. It also shuts the actor system's extensions down;
		// local actors keep running for the drain below.
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.member.Shutdown()
		}()
	}
	wg.Wait()
	s.api.gate.wait(grpcDone, timeout)
	if s.api.auditor != nil {
		s.api.auditor.close() // its entries reach the writer before it drains
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stopErr := s.node.Stop(ctx)
	if stopErr != nil {
		stopErr = fmt.Errorf("drain actors: %w", stopErr)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), timeout)
	s.feeds.Close(fctx)
	fcancel()
	<-grpcDone

	var httpErr error
	if s.http != nil {
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		httpErr = s.http.Shutdown(hctx)
		hcancel()
	}
	s.serves.Wait()
	if s.member == nil { // the member's Shutdown did it: a second one panics
		s.sys.Shutdown()
	}
	closeErr := s.store.Close()
	if closeErr != nil {
		closeErr = fmt.Errorf("close database: %w", closeErr)
	}
	return errors.Join(stopErr, httpErr, closeErr)
}

// stopGRPC stops the API gracefully, cutting it off after timeout
// (long-lived streams such as health Watch never end on their own).
func stopGRPC(api *apiServer, timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		api.srv.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		api.srv.Stop()
		<-done
	}
}

// abort undoes a partial start, in reverse order.
func (s *server) abort() {
	if s.api != nil {
		s.api.srv.Stop()
	}
	if s.remote != nil {
		s.remote.Shutdown()
	}
	if s.member != nil {
		s.member.Shutdown()
	}
	if s.node != nil {
		if err := s.node.Stop(context.Background()); err != nil {
			s.log.Error("stop actors after a failed start", "err", err)
		}
	}
	if s.feeds != nil {
		s.feeds.Close(context.Background())
	}
	if s.sys != nil && s.member == nil {
		s.sys.Shutdown()
	}
	if s.store != nil {
		s.store.Close()
	}
}

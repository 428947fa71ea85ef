package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ClusterKinds are the write kinds a cluster run measures, in report
// order: appends, session state changes and shared-scope changes made
// through a session (no audit entry), session creates and plan error
// records (each with an audit entry, so each takes the audit chain's lock
// on PostgreSQL).
var ClusterKinds = []string{"append", "state", "scope", "create", "plan"}

// ClusterConfig is one cluster measurement: Members `node serve
// --cluster` processes (automanaged membership on loopback) on one fresh
// database of the PostgreSQL server Postgres, driven over gRPC by Callers
// unary callers, caller c on member c mod Members, Ops writes of Kind in
// all.
type ClusterConfig struct {
	Postgres string
	// Serve is the command line of `node serve` (program and arguments).
	Serve   []string
	Members int
	Kind    string
	Callers int
	Ops     int
	// Sessions (or plans) the appends, state changes and plan records go
	// to, round-robin.
	Sessions int
	// AuditChains, when above 0, is the members' audit_chains DSN
	// parameter: the audit trail partitioned into that many chains.
	AuditChains int
	// ProfileDir, when set, gets a CPU profile of each member
	// (member-<i>.pprof, written when it drains).
	ProfileDir string
	// RouteToOwner sends each caller's writes of a session or plan to its
	// owner once a member named it (node/client's OwnerRouter, one per
	// connection): after its first write of a session, a caller's writes
	// of it are not forwarded between members. Off, every write goes to
	// the caller's member, which forwards it when it does not own it: the
	// figures of runs before the option.
	RouteToOwner bool
	// Progress as in Config.
	Progress func(done, total int)
}

// ClusterResult is one cluster measurement.
type ClusterResult struct {
	Members   int           `json:"members"`
	Kind      string        `json:"kind"`
	Callers   int           `json:"callers"`
	Ops       int           `json:"ops"`
	Errors    int           `json:"errors"`
	FirstErr  string        `json:"first_error,omitempty"`
	Duration  time.Duration `json:"duration_ns"`
	OpsPerSec float64       `json:"ops_per_sec"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	// MemberCPUPerOp is each member's CPU time in the timed window per
	// acknowledged write; ClientCPUPerOp this process's.
	MemberCPUPerOp []time.Duration `json:"member_cpu_per_op_ns"`
	ClientCPUPerOp time.Duration   `json:"client_cpu_per_op_ns"`
	// CommitsPerOp is the database's committed transactions in the window
	// (pg_stat_database: every connection to it, the members' reads
	// included, the sampler's own left out) per write.
	CommitsPerOp float64 `json:"commits_per_op"`
	// WALBytesPerOp is the server's WAL written in the window per write.
	WALBytesPerOp float64 `json:"wal_bytes_per_op"`
	// LockWaitShare is the share of the sampled busy backends of the
	// run's database (pg_stat_activity, every few milliseconds) that were
	// waiting on a heavyweight lock (wait_event_type Lock): near 0, the
	// writers do not take turns on rows; near 1, they mostly wait.
	LockWaitShare float64 `json:"lock_wait_share"`
	// Waits are the sampled busy backends by wait event ("cpu" when
	// running), for where the time goes.
	Waits map[string]int `json:"waits"`
	// Load is the machine's load average when the run ended.
	Load string `json:"load"`
	// RouteToOwner is the config's; with it, Routed writes of the timed
	// window were sent to an owner a member had named, Hinted answers
	// named one (a member forwarded the write), FellBack writes were sent
	// again through the caller's member after their owner answered
	// UNAVAILABLE.
	RouteToOwner bool  `json:"route_to_owner,omitempty"`
	Routed       int64 `json:"routed,omitempty"`
	Hinted       int64 `json:"hinted,omitempty"`
	FellBack     int64 `json:"fell_back,omitempty"`
}

// RunCluster measures one cluster configuration on a fresh database.
func RunCluster(ctx context.Context, cfg ClusterConfig) (res ClusterResult, err error) {
	if cfg.Members < 1 || cfg.Callers < 1 || cfg.Ops < 1 || cfg.Sessions < 1 || len(cfg.Serve) == 0 {
		return res, fmt.Errorf("bench: cluster needs members, callers, ops and sessions ≥ 1 and a serve command")
	}
	op, ok := clusterOps[cfg.Kind]
	if !ok {
		return res, fmt.Errorf("bench: unknown cluster kind %q (known: %s)", cfg.Kind, strings.Join(ClusterKinds, ", "))
	}
	dsn, drop, err := pgDatabase(ctx, cfg.Postgres)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, drop()) }()
	memberDSN := dsn
	if cfg.AuditChains > 0 {
		// The members' store reads the parameter; the sampler's plain
		// connection must not send it to the server.
		u, err := url.Parse(dsn)
		if err != nil {
			return res, err
		}
		q := u.Query()
		q.Set("audit_chains", strconv.Itoa(cfg.AuditChains))
		u.RawQuery = q.Encode()
		memberDSN = u.String()
	}
	members, err := startMembers(ctx, cfg, memberDSN, freePort)
	defer func() {
		for _, m := range members {
			err = errors.Join(err, m.stop())
		}
	}()
	if err != nil {
		return res, err
	}
	var conns clusterConns
	defer conns.close()
	for _, m := range members {
		if err := conns.dialMember(m.addr, cfg.RouteToOwner); err != nil {
			return res, err
		}
	}
	return driveCluster(ctx, cfg, dsn, op, members, &conns)
}

// driveCluster runs the timed window: cfg.Callers callers, each with one
// write outstanding, caller c on member c mod Members, while a sampler
// watches the database's backends.
func driveCluster(ctx context.Context, cfg ClusterConfig, dsn string, op clusterOp, members []*member, cc *clusterConns) (ClusterResult, error) {
	res := ClusterResult{Members: cfg.Members, Kind: cfg.Kind, Callers: cfg.Callers, RouteToOwner: cfg.RouteToOwner}
	conns := cc.conns
	perMember := len(conns) / len(members)
	targets, err := op.setup(ctx, conns, cfg.Sessions)
	if err != nil {
		return res, fmt.Errorf("bench: cluster %s setup: %w", cfg.Kind, err)
	}
	sampler, err := startSampler(ctx, dsn)
	if err != nil {
		return res, err
	}
	var next, done, failed atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, cfg.Callers)
	stopProgress := progress(Config{Progress: cfg.Progress, Appends: cfg.Ops}, &done)
	cpu0 := make([]time.Duration, len(members))
	for i, m := range members {
		cpu0[i] = m.cpu()
	}
	routes0 := cc.stats()
	self0, t0 := processCPU(), time.Now()
	var wg sync.WaitGroup
	for c := range cfg.Callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c % len(members)
			conn := conns[m*perMember+(c/len(members))%perMember]
			for i := next.Add(1) - 1; i < int64(cfg.Ops); i = next.Add(1) - 1 {
				s := time.Now()
				if err := op.write(ctx, conn, targets, int(i)); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else {
					lat[c] = append(lat[c], time.Since(s))
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	res.Duration = time.Since(t0)
	selfCPU := processCPU() - self0
	routes := cc.stats()
	res.Routed, res.Hinted, res.FellBack = routes.Routed-routes0.Routed, routes.Hinted-routes0.Hinted, routes.FellBack-routes0.FellBack
	stopProgress()
	samples, err := sampler.stop(ctx)
	if err != nil {
		return res, err
	}
	res.Errors = int(failed.Load())
	if e, ok := firstErr.Load().(string); ok {
		res.FirstErr = e
	}
	res.Ops = cfg.Ops - res.Errors
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	var r Result
	r.percentiles(all)
	res.P50, res.P99 = r.P50, r.P99
	if res.Ops > 0 {
		res.OpsPerSec = float64(res.Ops) / res.Duration.Seconds()
		for i, m := range members {
			res.MemberCPUPerOp = append(res.MemberCPUPerOp, (m.cpu()-cpu0[i])/time.Duration(res.Ops))
		}
		res.ClientCPUPerOp = selfCPU / time.Duration(res.Ops)
		res.CommitsPerOp = float64(samples.commits) / float64(res.Ops)
		res.WALBytesPerOp = float64(samples.walBytes) / float64(res.Ops)
	}
	res.LockWaitShare, res.Waits = samples.lockShare(), samples.waits
	res.Load = loadAverage()
	return res, nil
}

// loadAverage is /proc/loadavg's three figures, or "" where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

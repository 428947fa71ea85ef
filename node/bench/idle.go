package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
)

// IdleConfig is one idle-memory measurement: Sessions sessions created
// (each with its first message) by Callers concurrent callers in an
// in-process node, then all passivated.
type IdleConfig struct {
	Sessions int
	// Callers defaults to DefaultCallers.
	Callers int
	// IdleTimeout passivates session actors idle this long while the
	// sessions are created; 0 keeps them all live until the end (the
	// node's default is minutes), so every session is live at once.
	IdleTimeout time.Duration
	// MessageBytes is the first message's size (DefaultMessageBytes).
	MessageBytes int
	// Synchronous as in Config (DefaultSynchronous).
	Synchronous string
	// DataDir as in Config.
	DataDir string
	// CacheKiB is each SQLite connection's page cache (the database
	// URL's cache_kib); 0: the store's default.
	CacheKiB int
}

// IdleResult is what MeasureIdle saw. Memory figures are in bytes; the
// RSS figures are 0 where the platform does not report them.
type IdleResult struct {
	Sessions    int           `json:"sessions"`
	Callers     int           `json:"callers"`
	IdleTimeout time.Duration `json:"idle_timeout_ns"`
	Duration    time.Duration `json:"duration_ns"`
	// PerSec is sessions created (with their first message) per second.
	PerSec float64 `json:"sessions_per_sec"`
	// PeakLive is the most session actors seen live at once (sampled at
	// every 1,024th create).
	PeakLive int `json:"peak_live"`
	// RSSPassivated is the process's resident memory once every actor
	// has passivated, before any collection is forced.
	RSSPassivated int64 `json:"rss_passivated_bytes"`
	// RSSIdle is the resident memory after a forced collection that
	// returns freed memory to the system (debug.FreeOSMemory): where an
	// idle process's scavenger ends. HeapLive is the live heap then.
	RSSIdle  int64 `json:"rss_idle_bytes"`
	HeapLive int64 `json:"heap_live_bytes"`
	// GoOther is the runtime's own memory besides the heap (stacks, GC
	// metadata, ...) then; RSSIdle minus HeapLive and GoOther is mostly
	// SQLite's (page caches, statements) and the program's text.
	GoOther int64 `json:"go_other_bytes"`
}

// MeasureIdle runs cfg and measures the memory the node keeps once every
// session is passivated; the node is stopped before it returns. Measure
// one configuration per process: RSS is the whole process's.
func MeasureIdle(ctx context.Context, cfg IdleConfig) (IdleResult, error) {
	if cfg.Callers == 0 {
		cfg.Callers = DefaultCallers
	}
	if cfg.MessageBytes == 0 {
		cfg.MessageBytes = DefaultMessageBytes
	}
	if cfg.Synchronous == "" {
		cfg.Synchronous = DefaultSynchronous
	}
	res := IdleResult{Sessions: cfg.Sessions, Callers: cfg.Callers, IdleTimeout: cfg.IdleTimeout}
	if cfg.Sessions < 1 || cfg.Callers < 1 || cfg.Callers > maxClients {
		return res, fmt.Errorf("bench idle: sessions must be ≥ 1 and callers 1..%d (got %d, %d)", maxClients, cfg.Sessions, cfg.Callers)
	}
	dir, err := os.MkdirTemp(cfg.DataDir, "agentstate-idle-*")
	if err != nil {
		return res, fmt.Errorf("bench idle: data dir: %w", err)
	}
	defer os.RemoveAll(dir)
	idle := cfg.IdleTimeout
	if idle == 0 {
		idle = time.Hour // none passivates before PassivateAll
	}
	url := "file:" + filepath.Join(dir, "idle.db") + "?synchronous=" + strings.ToLower(cfg.Synchronous)
	if cfg.CacheKiB != 0 {
		url += "&cache_kib=" + strconv.Itoa(cfg.CacheKiB)
	}
	n, err := startNodeURL(url, idle)
	if err != nil {
		return res, err
	}
	api := n.node.Sessions()
	content := strings.Repeat("x", cfg.MessageBytes)
	var next, peak atomic.Int64
	errs := make([]error, cfg.Callers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for c := range cfg.Callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(cfg.Sessions); i = next.Add(1) {
				if i%1024 == 0 {
					for live := int64(api.ActiveActors()); live > peak.Load(); {
						if peak.CompareAndSwap(peak.Load(), live) {
							break
						}
					}
				}
				r, err := api.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "bench"})
				if err == nil {
					_, err = api.Append(ctx, &sessionv1.AppendRequest{SessionId: r.GetSession().GetSessionId(),
						Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: content, MessageId: ids.New()}}})
				}
				if err != nil {
					errs[c] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	res.Duration = time.Since(t0)
	res.PerSec = float64(cfg.Sessions) / res.Duration.Seconds()
	res.PeakLive = max(int(peak.Load()), api.ActiveActors())
	for _, e := range errs {
		if e != nil {
			return res, fmt.Errorf("bench idle: %w", errors.Join(e, stopNode(n)))
		}
	}
	api.PassivateAll()
	if err := api.WaitPassivated(ctx); err != nil {
		return res, fmt.Errorf("bench idle: waiting for passivation: %w", errors.Join(err, stopNode(n)))
	}
	res.RSSPassivated = residentBytes()
	runtime.GC()
	debug.FreeOSMemory()
	res.RSSIdle = residentBytes()
	res.HeapLive, res.GoOther = goMemory()
	// The node is measured while it runs: runtime.KeepAlive keeps the
	// collector from treating it as garbage before this point.
	runtime.KeepAlive(n)
	return res, stopNode(n)
}

// goMemory is the live heap (objects) and the runtime's other memory.
func goMemory() (heap, other int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}, {Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	v := func(i int) int64 { return int64(s[i].Value.Uint64()) }
	heap = v(0)
	return heap, v(1) - heap - v(2) - v(3) - v(4)
}

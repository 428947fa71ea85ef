package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentstate/agentstate/messages/ids"
)

// member is one `node serve --cluster` process of a cluster run.
type member struct {
	*servedNode
	http string
}

// startMembers starts cfg.Members members on dsn, each the others' peer,
// on ports from pick, and waits until every one answers /readyz (it does
// once all joined). When one exits first (a port of it taken in
// between), all are stopped and the whole set started again on fresh
// ports, under a fresh cluster name, startTries times in all: every
// member has every other's automanaged port on its command line.
func startMembers(ctx context.Context, cfg ClusterConfig, dsn string, pick portPicker) ([]*member, error) {
	for try := 1; ; try++ {
		members, err := startMembersOnce(ctx, cfg, dsn, pick)
		if err == nil {
			return members, nil
		}
		for _, m := range members {
			m.kill()
		}
		if !errors.Is(err, errExitedEarly) || try == startTries {
			return nil, err
		}
	}
}

// startMembersOnce returns the members it started, even when it fails.
func startMembersOnce(ctx context.Context, cfg ClusterConfig, dsn string, pick portPicker) ([]*member, error) {
	name := "bench" + strings.ToLower(ids.New()[20:])
	loopback := func() (string, error) {
		p, err := pick()
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), err
	}
	am := make([]string, cfg.Members)
	for i := range am {
		var err error
		if am[i], err = loopback(); err != nil {
			return nil, err
		}
	}
	var members []*member
	for i := range cfg.Members {
		g, err := loopback()
		if err != nil {
			return members, err
		}
		h, err := loopback()
		if err != nil {
			return members, err
		}
		_, amPort, _ := net.SplitHostPort(am[i])
		argv := append(append([]string(nil), cfg.Serve...), "--data", dsn, "--grpc-addr", g, "--http-addr", h,
			"--cluster", name, "--peers", strings.Join(am, ","), "--am-port", amPort,
			"--insecure-remote-plaintext-loopback")
		if cfg.ProfileDir != "" {
			argv = append(argv, "--cpuprofile", filepath.Join(cfg.ProfileDir, fmt.Sprintf("member-%d.pprof", i)))
		}
		s, err := startProcess(argv, g)
		if err != nil {
			return members, fmt.Errorf("bench: member %d: %w", i, err)
		}
		members = append(members, &member{servedNode: s, http: h})
	}
	return members, waitMembers(ctx, members)
}

// waitMembers waits until every member has logged that it serves and then
// answered /readyz with 200; any member's exit ends the wait at the next
// poll. A member's HTTP port is only polled once it serves: until then
// another process may hold the port, and answer.
func waitMembers(ctx context.Context, members []*member) error {
	ctx, cancel := context.WithTimeout(ctx, serveReadyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	// Polling processes we do not control for readiness: no signal to
	// wait on instead.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	ready := 0 // members[:ready] answered /readyz
	for {
		for i, m := range members {
			if err := m.exitErr(); err != nil {
				return fmt.Errorf("bench: member %d: %w", i, err)
			}
		}
		for ready < len(members) && members[ready].ready(ctx, client) {
			ready++
		}
		if ready == len(members) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: member %d not ready at %s within %s: %w", ready, members[ready].http, serveReadyTimeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// ready reports whether the member serves and its /readyz answers 200.
func (m *member) ready(ctx context.Context, client *http.Client) bool {
	if !m.serving() {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.http+"/readyz", nil)
	if err != nil {
		return false
	}
	r, err := client.Do(req)
	if err != nil {
		return false
	}
	r.Body.Close()
	return r.StatusCode == http.StatusOK
}

package server

import (
	"bytes"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/persistence/postgres/pgtest"
)

func TestRedactData(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://user:secret@db:5432/agentstate?sslmode=disable", "postgres://user:xxxxx@db:5432/agentstate?sslmode=disable"},
		{"postgresql://user:s%40cret@db/agentstate", "postgresql://user:xxxxx@db/agentstate"},
		{"postgres://user@db/agentstate?password=secret&sslmode=require", "postgres://user@db/agentstate?password=xxxxx&sslmode=require"},
		{"postgres://db/agentstate?sslpassword=secret", "postgres://db/agentstate?sslpassword=xxxxx"},
		{"postgres://user@db/agentstate", "postgres://user@db/agentstate"},
		{"postgres://user:secret@db:bad port/x", "postgres://(unparsable URL, not shown)"},
		{"./data/agentstate.db", "./data/agentstate.db"},
		{"memory:x", "memory:x"},
	} {
		got := redactData(tc.in)
		if got != tc.want {
			t.Errorf("redactData(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "secret") || strings.Contains(got, "s%40cret") {
			t.Errorf("redactData(%q) = %q shows the password", tc.in, got)
		}
	}
}

// logBuffer collects a node's log lines; the node logs from several
// goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startLogged starts a node with cfg, returning what it logged by the time
// Start returned (the serving line is the last thing Start logs).
func startLogged(t *testing.T, cfg *Config) string {
	t.Helper()
	cfg.HTTPAddr = ""
	cfg.ShutdownTimeout = 10 * time.Second
	var lines logBuffer
	n, err := Start(cfg, slog.New(slog.NewTextHandler(&lines, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	return lines.String()
}

// The serving line shows a PostgreSQL --data with its password masked,
// as the error path always did.
func TestServingLineMasksThePassword(t *testing.T) {
	dsn := pgtest.Database(t, "agentstate_node_")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok {
		t.Skip("the test DSN has no password to mask")
	}
	cfg := DefaultConfig()
	cfg.Data, cfg.GRPCAddr = dsn, "127.0.0.1:0"
	logged := startLogged(t, cfg)
	if !strings.Contains(logged, "msg=serving") {
		t.Fatalf("no serving line:\n%s", logged)
	}
	if strings.Contains(logged, ":"+pw+"@") || strings.Contains(logged, "password="+pw) {
		t.Fatalf("the log shows the password:\n%s", logged)
	}
	if !strings.Contains(logged, ":"+maskedPassword+"@") {
		t.Fatalf("the serving line does not show the masked DSN:\n%s", logged)
	}
}

// A node whose gRPC API listens beyond loopback without TLS or a token
// warns at start; on loopback it does not.
func TestExposedPlaintextWarns(t *testing.T) {
	for _, tc := range []struct {
		addr string
		warn bool
	}{{"127.0.0.1:0", false}, {"0.0.0.0:0", true}} {
		cfg := DefaultConfig()
		cfg.Data, cfg.GRPCAddr = "memory:"+strings.NewReplacer(".", "_", ":", "_").Replace(t.Name()+tc.addr), tc.addr
		logged := startLogged(t, cfg)
		warned := strings.Contains(logged, "level=WARN") && strings.Contains(logged, "neither TLS nor a token")
		if warned != tc.warn {
			t.Errorf("%s: warned %v, want %v:\n%s", tc.addr, warned, tc.warn, logged)
		}
	}
}

func TestExposedWarning(t *testing.T) {
	wild := &net.TCPAddr{IP: net.IPv4zero, Port: 7420}
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7420}
	lo6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 7420}
	for _, tc := range []struct {
		addr       net.Addr
		tls, token bool
		want       string
	}{
		{lo, false, false, ""}, {lo6, false, false, ""}, {wild, true, true, ""},
		{wild, false, false, "neither TLS nor a token"}, {wild, false, true, "without TLS"}, {wild, true, false, "without a token"},
	} {
		got := exposedWarning(tc.addr, tc.tls, tc.token)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%v tls=%v token=%v: %q, want one with %q", tc.addr, tc.tls, tc.token, got, tc.want)
		}
	}
}

package journal_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/journal"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The kill -9 test re-runs this test binary as the process that is
// killed: a node on a SQLite file and one recorder persisting through
// persistence.Mixin, printing each event it acknowledged.
const (
	crashDBEnv   = "AGENTSTATE_JOURNAL_CRASH_DB"
	crashRunEnv  = "AGENTSTATE_JOURNAL_CRASH_RUN"
	crashStopEnv = "AGENTSTATE_JOURNAL_CRASH_STOP"
	crashActor   = "crash-recorder"
)

func TestMain(m *testing.M) {
	if db := os.Getenv(crashDBEnv); db != "" {
		os.Exit(runCrashChild(db, os.Getenv(crashRunEnv), os.Getenv(crashStopEnv) != ""))
	}
	os.Exit(m.Run())
}

// recoveredLine is what a child prints once its recorder recovered.
type recoveredLine struct {
	Values       []string `json:"values"`
	FromSnapshot int      `json:"from_snapshot"`
}

// runCrashChild recovers the recorder, prints "recovered <json>", then
// (unless stop) sends it "<run>-0", "<run>-1", ... one after another until
// killed; the recorder prints "ack <index> <value>" after each event
// committed. With stop it shuts down cleanly after the recovery.
func runCrashChild(db, run string, stop bool) int {
	store, err := sqlite.Open(db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sys := newSystem()
	node, err := actors.Start(sys, store, actors.Config{Writer: writer.Config{Logger: quiet}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	j := journal.New(node.Sessions(), journal.Config{SnapshotInterval: 16})
	recovered := make(chan struct{})
	var once sync.Once
	props := recorderProps(j, func() *recorder {
		return &recorder{
			truncate: true,
			recovered: func(r *recorder) {
				b, _ := json.Marshal(recoveredLine{Values: r.values, FromSnapshot: r.fromSnapshot})
				fmt.Fprintf(os.Stdout, "recovered %s\n", b)
				once.Do(func() { close(recovered) })
			},
			// Printed after PersistReceive returned: the event committed.
			acked: func(i int, v string) { fmt.Fprintf(os.Stdout, "ack %d %s\n", i, v) },
		}
	})
	pid, err := sys.Root.SpawnNamed(props, crashActor)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-recovered
	if stop {
		sys.Root.PoisonFuture(pid).Wait()
		err := node.Stop(context.Background())
		sys.Shutdown()
		store.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	for k := 0; ; k++ {
		if _, err := sys.Root.RequestFuture(pid, wrapperspb.String(fmt.Sprintf("%s-%d", run, k)), time.Minute).Result(); err != nil {
			fmt.Fprintln(os.Stderr, "command:", err)
			return 1
		}
	}
}

// crashChild is a running child and its output, line by line.
type crashChild struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
}

func startCrashChild(t *testing.T, db, run string, stop bool) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDBEnv+"="+db, crashRunEnv+"="+run)
	if stop {
		cmd.Env = append(cmd.Env, crashStopEnv+"=1")
	}
	c := &crashChild{cmd: cmd, lines: make(chan string, 1024), stderr: &bytes.Buffer{}}
	cmd.Stderr = c.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.kill() })
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

func (c *crashChild) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			err := c.cmd.Wait()
			t.Fatalf("the child's output ended (%v); stderr:\n%s", err, c.stderr)
		}
		return l
	case <-time.After(time.Minute):
		t.Fatalf("no line from the child within a minute; stderr:\n%s", c.stderr)
		return ""
	}
}

// kill sends SIGKILL (no chance to flush or stop anything) and reaps it.
func (c *crashChild) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

// A persistent actor killed -9 mid-run, again and again, recovers on the
// same SQLite file every event it acknowledged, in order, with its state
// replayed from the snapshot (whose covered events it deleted) and the
// events after it; at most the one event in flight when it was killed is
// stored without having been acknowledged, and then it is the next one it
// was sent.
func TestKill9RecoversEveryAcknowledgedEvent(t *testing.T) {
	db := filepath.Join(t.TempDir(), "journal.db")
	const kills = 3
	var history []string // what the store must hold, in index order
	acked, fromSnapshot := 0, 0
	prevRun, prevSent := "", 0
	for cycle := 0; cycle <= kills; cycle++ {
		run := fmt.Sprintf("run%d", cycle)
		last := cycle == kills
		c := startCrashChild(t, db, run, last)

		line := c.next(t)
		payload, ok := strings.CutPrefix(line, "recovered ")
		if !ok {
			t.Fatalf("first line %q, want the recovery", line)
		}
		var rec recoveredLine
		if err := json.Unmarshal([]byte(payload), &rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.Values) < len(history) || !slices.Equal(rec.Values[:len(history)], history) {
			t.Fatalf("cycle %d recovered %d events, not a continuation of the %d acknowledged: %q", cycle, len(rec.Values), len(history), rec.Values)
		}
		if extra := rec.Values[len(history):]; len(extra) > 1 || len(extra) == 1 && extra[0] != fmt.Sprintf("%s-%d", prevRun, prevSent) {
			t.Fatalf("cycle %d recovered unacknowledged events %q; at most the one in flight (%s-%d) may be", cycle, extra, prevRun, prevSent)
		}
		fromSnapshot = max(fromSnapshot, rec.FromSnapshot)
		history = rec.Values
		if last {
			if err := c.cmd.Wait(); err != nil {
				t.Fatalf("the last child: %v; stderr:\n%s", err, c.stderr)
			}
			break
		}

		// Let it acknowledge some events, then kill it while it keeps
		// persisting: the next event may be anywhere between sent and
		// committed. Acks it printed before dying count, read or not.
		ack := func(k int, line string) {
			f := strings.Fields(line)
			if len(f) != 3 || f[0] != "ack" {
				t.Fatalf("line %q, want an ack", line)
			}
			idx, err := strconv.Atoi(f[1])
			if err != nil || idx != len(history) || f[2] != fmt.Sprintf("%s-%d", run, k) {
				t.Fatalf("ack %q, want index %d value %s-%d", line, len(history), run, k)
			}
			history = append(history, f[2])
			acked++
		}
		k := 0
		for target := 40 + rand.IntN(80); k < target; k++ {
			ack(k, c.next(t))
		}
		c.kill()
		for line := range c.lines {
			ack(k, line)
			k++
		}
		prevRun, prevSent = run, k
	}
	if acked < kills*40 || len(history) < acked {
		t.Fatalf("%d events acknowledged, %d in the history", acked, len(history))
	}
	t.Logf("%d kills: %d events acknowledged, %d stored; the largest snapshot recovered held %d", kills, acked, len(history), fromSnapshot)
	if fromSnapshot < 16 {
		t.Errorf("no recovery started from a snapshot (largest: %d values)", fromSnapshot)
	}
	// The snapshot's events were deleted, and what is left starts right
	// after the last snapshot.
	store, err := sqlite.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	n := startOn(t, store)
	sess := sessionOf(t, n, "protoactor", crashActor)
	if sess.GetMessageCount() != int64(len(history)) || sess.GetFirstSequence() < 16 || sess.GetFirstSequence()%16 != 0 {
		t.Errorf("session: next sequence %d (history %d), first sequence %d (want a positive multiple of 16)",
			sess.GetMessageCount(), len(history), sess.GetFirstSequence())
	}
}

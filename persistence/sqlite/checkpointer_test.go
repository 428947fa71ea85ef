package sqlite

import (
	"context"
	"database/sql"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/agentstate/agentstate/persistence/storetest"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// appendTurns commits n messages of content to session id from seq on.
func appendTurns(w persistence.Writer, id string, seq int64, n int, content string) error {
	turns := make([]persistence.Turn, n)
	for j := range turns {
		turns[j] = persistence.Turn{Messages: []*sessionv1.Message{{MessageId: ids.New(), Content: content, CreatedAt: timestamppb.Now()}}}
	}
	res, err := w.Apply(context.Background(), []persistence.Command{&persistence.AppendMessages{SessionID: id, NextSequence: seq, Turns: turns, UpdatedAt: time.Now()}})
	if err != nil {
		return err
	}
	return res[0].Err
}

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatalf("stat WAL: %v", err)
	}
	return st.Size()
}

// walState returns a function that reads how many frames the WAL of path
// holds and how many of them are copied back, on a connection of the
// test's own (PRAGMA wal_checkpoint(NOOP) copies nothing): a restart shows
// as a drop of the first.
func walState(t *testing.T, path string) func() (log, copied int64) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return func() (log, copied int64) {
		t.Helper()
		var busy int64
		if err := db.QueryRow("PRAGMA wal_checkpoint(NOOP)").Scan(&busy, &log, &copied); err != nil {
			t.Fatal(err)
		}
		return log, copied
	}
}

// Commits leave checkpointing to the checkpointer: with it idle, the WAL
// keeps every frame past SQLite's automatic threshold (1,000 frames) and
// none is copied back. It also pins what the checkpointer relies on: SQLite
// knows the NOOP mode (an older one would read it as PASSIVE and copy).
func TestCommitsDoNotCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nockpt.db")
	s := mustOpen(t, path)
	defer mustClose(t, s)
	s.ckpt.frames.Store(math.MaxInt64)
	id := storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	content := strings.Repeat("x", 3000)
	for i := 0; i < 60; i++ {
		if err := appendTurns(w, id, int64(i*20), 20, content); err != nil {
			t.Fatal(err)
		}
	}
	log, copied := walState(t, path)()
	if log < 1000 || copied != 0 {
		t.Fatalf("WAL has %d frames, %d copied back; want >= 1000 frames, none copied", log, copied)
	}
	if c := s.CheckpointCounts(); c != (CheckpointCounts{}) {
		t.Fatalf("checkpoints ran: %+v", c)
	}
}

// Under continuous writes with no reader, the checkpointer alone keeps the
// WAL small: it restarts it every few hundred KiB, and the writer never
// needs its forced checkpoint.
func TestCheckpointerRestartsWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "restart.db")
	s := mustOpen(t, path)
	defer mustClose(t, s)
	const frames = 64 // 256 KiB of 4 KiB pages
	s.ckpt.frames.Store(frames)
	s.wmu.Lock()
	s.walLimit = math.MaxInt64 / hardWALFactor
	s.wmu.Unlock()
	id := storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	content := strings.Repeat("x", 2000)
	const batches, perBatch = 800, 8
	var maxWAL int64
	for i := 0; i < batches; i++ {
		if err := appendTurns(w, id, int64(i*perBatch), perBatch, content); err != nil {
			t.Fatal(err)
		}
		maxWAL = max(maxWAL, walSize(t, path))
	}
	c := s.CheckpointCounts()
	t.Logf("wrote %d KiB; WAL peaked at %d KiB; %+v", batches*perBatch*len(content)>>10, maxWAL>>10, c)
	if c.Passes == 0 || c.Restarts == 0 || c.Forced != 0 {
		t.Fatalf("want passes and restarts and no forced checkpoint, got %+v", c)
	}
	// The writer may outrun the checkpointer by the commits of one round
	// (a pass and an fsync, a few commits here); 16 rounds' worth of
	// frames is far above that and far below the 12 MiB written.
	if bound := int64(16 * frames * 4096); maxWAL > bound {
		t.Fatalf("WAL grew to %d bytes, bound %d", maxWAL, bound)
	}
}

// A reader holding its snapshot keeps the WAL from restarting, and only
// while it holds it: once it lets go, the checkpointer restarts the WAL.
func TestCheckpointerRestartsAfterHeldReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held.db")
	s := mustOpen(t, path)
	defer mustClose(t, s)
	s.ckpt.frames.Store(32)
	s.wmu.Lock()
	s.walLimit = math.MaxInt64 / hardWALFactor
	s.wmu.Unlock()
	state := walState(t, path)
	frames := func() int64 { log, _ := state(); return log }
	id := storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	ctx := context.Background()
	content := strings.Repeat("y", 2000)
	seq := int64(0)
	write := func() {
		t.Helper()
		if err := appendTurns(w, id, seq, 4, content); err != nil {
			t.Fatal(err)
		}
		seq += 4
	}
	// The snapshot must need WAL frames: a reader that starts when the
	// checkpointer has copied every frame reads the database file alone,
	// and SQLite may then restart the WAL under it. The copied count is
	// read after the snapshot began; nothing writes in between and it only
	// grows, so copied < log then means frames were uncopied when it began.
	var tx *sql.Tx
	for try := 0; ; try++ {
		if try == 200 {
			t.Fatalf("the checkpointer copied every frame before each of %d snapshots", try)
		}
		write()
		var err error
		if tx, err = s.rdb.BeginTx(ctx, nil); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM session_messages`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if log, copied := state(); copied < log {
			break
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	last := frames()
	for i := 0; i < 100; i++ {
		write()
		if f := frames(); f < last {
			t.Fatalf("the WAL restarted under a held snapshot: %d frames, then %d", last, f)
		} else {
			last = f
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The checkpointer runs after commits, in its own time: write until
	// the WAL has restarted, within a bound far above what that needs.
	for i := 0; ; i++ {
		if i == 2000 {
			t.Fatalf("no restart in %d commits after the reader let go: %+v", i, s.CheckpointCounts())
		}
		write()
		f := frames()
		if f < last {
			break
		}
		last = f
	}
}

// With readers reading all the time, restarts may fail, and the writer's
// forced checkpoint keeps the bound while the checkpointer keeps copying.
func TestWALBoundedWithCheckpointerUnderReads(t *testing.T) {
	const batches, perBatch = 120, 20
	s, id, maxWAL, bound := writeUnderReads(t, 16, batches, perBatch)
	c := s.CheckpointCounts()
	t.Logf("WAL peaked at %d KiB (bound %d KiB); %+v", maxWAL>>10, bound>>10, c)
	if maxWAL > bound {
		t.Fatalf("WAL grew to %d bytes, bound %d", maxWAL, bound)
	}
	if c.Passes == 0 {
		t.Fatalf("the checkpointer never ran: %+v", c)
	}
	if got, err := s.Reader().GetSession(context.Background(), id); err != nil || got.GetMessageCount() != batches*perBatch {
		t.Fatalf("GetSession: %v, %d messages", err, got.GetMessageCount())
	}
}

// writeUnderReads appends batches transactions of perBatch 2,000-byte
// messages to one session of a file store whose writer forces a checkpoint
// above 256 KiB of WAL and whose checkpointer waits for frames frames, while
// two readers list the session all the time. It returns the store (closed
// when the test ends), the session, the largest WAL seen after a commit, and
// the bound the WAL must keep: above hardWALFactor times the limit the
// writer waits for readers, so at most one commit (twice its content, for
// index pages) and one settle's copy of the pending entries come on top.
func writeUnderReads(t *testing.T, frames int64, batches, perBatch int) (s *Store, id string, maxWAL, bound int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reads.db")
	s = mustOpen(t, path)
	t.Cleanup(func() { mustClose(t, s) })
	const limit = 256 << 10
	s.ckpt.frames.Store(frames)
	s.wmu.Lock()
	s.walLimit = limit
	s.wmu.Unlock()
	id = storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Reader().ListMessages(context.Background(), id, 0, 1000); err != nil {
					t.Errorf("ListMessages: %v", err)
					return
				}
			}
		}()
	}
	content := strings.Repeat("z", 2000)
	for i := 0; i < batches; i++ {
		if err := appendTurns(w, id, int64(i*perBatch), perBatch, content); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		maxWAL = max(maxWAL, walSize(t, path))
	}
	close(stop)
	wg.Wait()
	return s, id, maxWAL, int64(hardWALFactor*limit + 2*perBatch*len(content) + settleRows*len(content))
}

// Close stops a busy checkpointer before it closes the connections: a
// writer keeps committing (and waking it) until Close, Close succeeds, the
// writer then gets UNAVAILABLE, and the checkpointer's goroutine is gone.
// Run under -race.
func TestCloseStopsCheckpointer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "close.db")
	s := mustOpen(t, path)
	s.ckpt.frames.Store(8)
	ckpt := s.ckpt
	id := storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	busy := make(chan struct{})
	failed := make(chan error, 1)
	go func() {
		content := strings.Repeat("c", 2000)
		signalled := false
		for seq := int64(0); ; seq += 4 {
			if err := appendTurns(w, id, seq, 4, content); err != nil {
				failed <- err
				return
			}
			if !signalled && s.CheckpointCounts().Restarts > 0 {
				close(busy)
				signalled = true
			}
		}
	}()
	<-busy
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-failed; errs.CodeOf(err) != errs.UnavailableCode {
		t.Fatalf("Apply after Close: %v, want UNAVAILABLE", err)
	}
	select {
	case <-ckpt.done:
	default:
		t.Fatal("the checkpointer still runs after Close")
	}
	w.Release()
}

// A memory database has no WAL and no checkpointer.
func TestMemoryStoreHasNoCheckpointer(t *testing.T) {
	s := mustOpen(t, "memory:no-checkpointer")
	defer mustClose(t, s)
	if s.ckpt != nil {
		t.Fatal("a memory database got a checkpointer")
	}
	id := storetest.CreateSession(t, s)
	w, err := s.Writer()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	if err := appendTurns(w, id, 0, 4, "m"); err != nil {
		t.Fatal(err)
	}
	if c := s.CheckpointCounts(); c != (CheckpointCounts{}) {
		t.Fatalf("checkpoints on a memory database: %+v", c)
	}
}

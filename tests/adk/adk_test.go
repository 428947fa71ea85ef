package main

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/agentstate/agentstate/node/bench"
)

func TestEachModeTiny(t *testing.T) {
	cfg := bench.Config{Sessions: 2, Clients: 2, Appends: 40, MessageBytes: 32, Synchronous: "normal", DataDir: t.TempDir()}
	for _, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			res, err := measure(context.Background(), cfg, mode, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Complete || res.Appends+res.Errors != 40 || res.Stored != res.Appends || res.Unacked != 0 {
				t.Fatalf("%s: %+v", mode, res)
			}
			// Only independent adk handles may fail (stale session after
			// its retries); the others must store everything.
			if mode != "adk" && res.Errors != 0 {
				t.Fatalf("%s: %d errors, first: %s", mode, res.Errors, res.FirstError)
			}
		})
	}
}

// TestPerClientHandles checks that mode adk really gives each client a
// handle of its own: bench asks the target once per client.
func TestPerClientHandles(t *testing.T) {
	tg, err := openADK(t.TempDir()+"/h.db", "normal", false)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	counted := &countingTarget{adkTarget: tg}
	cfg := bench.Config{Mode: "adk", Sessions: 2, Clients: 3, Appends: 12, MessageBytes: 8, Synchronous: "normal"}
	res, err := bench.Drive(context.Background(), cfg, counted)
	if err != nil {
		t.Fatal(err)
	}
	if got := counted.clients.Load(); got != 6 {
		t.Fatalf("NewClient called %d times; want one per client (6)", got)
	}
	if res.Appends+res.Errors != 12 || res.Missing != 0 || res.Unacked != 0 {
		t.Fatalf("%+v", res)
	}
}

func TestDriveCountsProgress(t *testing.T) {
	tg, err := openADK(t.TempDir()+"/p.db", "normal", true)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	var last atomic.Int64
	cfg := bench.Config{Mode: "adk-serialized", Sessions: 1, Clients: 3, Appends: 10, MessageBytes: 8, Synchronous: "normal",
		Progress: func(done, _ int) { last.Store(int64(done)) }}
	res, err := bench.Drive(context.Background(), cfg, tg)
	if err != nil {
		t.Fatal(err)
	}
	if last.Load() != 10 || res.Appends != 10 || !res.Complete {
		t.Fatalf("progress %d, %+v", last.Load(), res)
	}
}

// countingTarget counts the per-client handles bench asks for.
type countingTarget struct {
	*adkTarget
	clients atomic.Int64
}

func (c *countingTarget) NewClient(ctx context.Context, sessionID string) (bench.Appender, error) {
	c.clients.Add(1)
	return c.adkTarget.NewClient(ctx, sessionID)
}

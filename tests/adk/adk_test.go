package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestEachModeTiny(t *testing.T) {
	cfg := config{Sessions: 2, Clients: 2, Appends: 40, MessageBytes: 32, Synchronous: "normal", DataDir: t.TempDir()}
	for _, mode := range allModes {
		t.Run(mode, func(t *testing.T) {
			res, err := measure(context.Background(), cfg, mode, testWriter{t})
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

func TestCheckFindsFaults(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, int64(ms)*int64(time.Millisecond)) }
	c := &client{acked: []acked{
		{id: "a", seq: -1, start: at(0), end: at(1)},
		{id: "b", seq: -1, start: at(2), end: at(3)},
		{id: "c", seq: -1, start: at(4), end: at(5)},
	}}
	var res Result
	// b is stored before a although a was answered before b was sent; c
	// is lost; "x" was never acknowledged.
	check([]stored{{ID: "b", Seq: -1}, {ID: "a", Seq: -1}, {ID: "x", Seq: -1}}, []*client{c}, &res)
	if res.OutOfOrder != 1 || res.Missing != 1 || res.Unacked != 1 || res.Stored != 3 {
		t.Fatalf("got %+v", res)
	}
}

func TestDriveCountsProgress(t *testing.T) {
	cfg := config{Sessions: 1, Clients: 3, Appends: 10, MessageBytes: 8, Synchronous: "normal"}
	tg, err := openADK(t.TempDir()+"/p.db", cfg.Synchronous, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	var done atomic.Int64
	res, err := drive(context.Background(), cfg, "adk-serialized", tg, &done)
	if err != nil {
		t.Fatal(err)
	}
	if done.Load() != 10 || res.Appends != 10 || !res.Complete {
		t.Fatalf("done %d, %+v", done.Load(), res)
	}
}

// testWriter sends the progress bar to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

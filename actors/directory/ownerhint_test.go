package directory_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/directory"
)

func TestOwnerSinkKeepsTheLastOwnerNoted(t *testing.T) {
	ctx, sink := directory.WithOwnerSink(context.Background())
	if got := sink.Owner(); got != "" {
		t.Fatalf("new sink holds %q, want nothing", got)
	}
	// A context derived from the request's (a deadline, as the façades
	// add) reaches the same sink.
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	directory.NoteOwner(dctx, "10.0.0.2:7420")
	if got := sink.Owner(); got != "10.0.0.2:7420" {
		t.Fatalf("sink holds %q, want 10.0.0.2:7420", got)
	}
	directory.NoteOwner(ctx, "") // a member that published no address
	if got := sink.Owner(); got != "10.0.0.2:7420" {
		t.Fatalf("an empty address replaced the owner: %q", got)
	}
	directory.NoteOwner(ctx, "10.0.0.3:7420")
	if got := sink.Owner(); got != "10.0.0.3:7420" {
		t.Fatalf("sink holds %q, want the last owner 10.0.0.3:7420", got)
	}
}

func TestNoteOwnerWithoutSinkDoesNothing(t *testing.T) {
	directory.NoteOwner(context.Background(), "10.0.0.2:7420") // must not panic
	_, other := directory.WithOwnerSink(context.Background())
	directory.NoteOwner(context.Background(), "10.0.0.2:7420")
	if got := other.Owner(); got != "" {
		t.Fatalf("a note without a sink in its context reached another sink: %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { directory.NoteOwner(context.Background(), "10.0.0.2:7420") }); n != 0 {
		t.Fatalf("NoteOwner without a sink allocates %v times", n)
	}
}

func TestOwnerSinkConcurrentNotes(t *testing.T) {
	ctx, sink := directory.WithOwnerSink(context.Background())
	addrs := []string{"10.0.0.2:7420", "10.0.0.3:7420"}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			directory.NoteOwner(ctx, addrs[i%2])
			_ = sink.Owner()
		}()
	}
	wg.Wait()
	if got := sink.Owner(); got != addrs[0] && got != addrs[1] {
		t.Fatalf("sink holds %q, want one of %v", got, addrs)
	}
}

package feed_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/feed"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// A change filter names at most MaxFilterEventTypes event types: a longer
// list is INVALID_ARGUMENT before anything is read (100,000 of them once
// reached the store and answered INTERNAL), and a list at the bound is
// served.
func TestChangeFilterEventTypesAreBounded(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	e.create()
	typesOf := func(n int) []string {
		ts := []string{audit.EventSessionCreated}
		for i := 1; i < n; i++ {
			ts = append(ts, fmt.Sprintf("unknown_type_%d", i))
		}
		return ts
	}
	for _, n := range []int{feed.MaxFilterEventTypes + 1, 100_000} {
		_, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{Filter: &feedv1.ChangeFilter{EventTypes: typesOf(n)}})
		if errs.CodeOf(err) != errs.InvalidArgumentCode || !strings.Contains(err.Error(), fmt.Sprint(feed.MaxFilterEventTypes)) {
			t.Fatalf("%d event types: %v, want INVALID_ARGUMENT naming the bound", n, err)
		}
	}
	tail, err := e.hub.TailChanges(e.ctx, &feedv1.TailChangesRequest{Filter: &feedv1.ChangeFilter{EventTypes: typesOf(feed.MaxFilterEventTypes)}})
	if err != nil {
		t.Fatalf("%d event types: %v", feed.MaxFilterEventTypes, err)
	}
	defer tail.Close()
	var v changeView
	readChanges(t, tail, &v, 1)
	if len(v.entries) != 1 || v.entries[0].GetEventType() != audit.EventSessionCreated {
		t.Fatalf("delivered %v, want the one session_created entry", v.entries)
	}
}

package main

import (
	"os"
	"strings"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// Keyed items through the CLI: append --item-key/--kind, a second append
// with --keep-stored answers the stored message (kept), a file's messages
// carry keys, get-item reads one and items lists by kind and prefix.
func TestCLIKeyedItems(t *testing.T) {
	addr, sid := startSessionForCLI(t, &sessionv1.CreateSessionRequest{ActorName: "cli"})
	node := cliRunner(t, addr)
	cli := func(want int, args ...string) string {
		t.Helper()
		return node(want, append([]string{"session", args[0], "--session", sid}, args[1:]...)...)
	}
	cli(exitOK, "append", "--role", "tool", "--content", "first", "--item-key", "cp:1", "--kind", "checkpoint")
	var r sessionv1.AppendResponse
	if err := protojson.Unmarshal([]byte(cli(exitOK, "append", "--role", "tool", "--content", "again", "--item-key", "cp:1", "--keep-stored")), &r); err != nil {
		t.Fatal(err)
	}
	if m := r.GetMessages()[0]; !m.GetKept() || m.GetSequence() != 0 {
		t.Fatalf("keep-stored append answered %v, want the stored message, kept", m)
	}
	cli(exitAlreadyExists, "append", "--role", "tool", "--content", "again", "--item-key", "cp:1")
	cli(exitUsage, "append", "--message", "user=x", "--item-key", "k")
	turn := t.TempDir() + "/turn.json"
	if err := os.WriteFile(turn, []byte(`[{"role":"tool","content":"w","item_key":"w:1","kind":"write"},
		{"role":"tool","content":"dup","item_key":"cp:1","keep_stored":true},
		{"role":"tool","content":"cp2","item_key":"cp:2","kind":"checkpoint"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	cli(exitOK, "append", "--file", turn)

	var g sessionv1.GetItemResponse
	if err := protojson.Unmarshal([]byte(cli(exitOK, "get-item", "--key", "w:1")), &g); err != nil {
		t.Fatal(err)
	}
	if g.GetMessage().GetSequence() != 1 || g.GetMessage().GetKind() != "write" {
		t.Fatalf("get-item: %v", &g)
	}
	cli(exitNotFound, "get-item", "--key", "nope")
	cli(exitUsage, "get-item")

	pages := strings.Split(strings.TrimSpace(cli(exitOK, "items", "--kind", "checkpoint", "--newest", "--limit", "1", "--all")), "\n")
	var keys []string
	for _, p := range pages {
		var l sessionv1.ListItemsResponse
		if err := protojson.Unmarshal([]byte(p), &l); err != nil {
			t.Fatal(err)
		}
		for _, m := range l.GetMessages() {
			keys = append(keys, m.GetItemKey())
		}
	}
	if strings.Join(keys, ",") != "cp:2,cp:1" {
		t.Fatalf("items --kind checkpoint --newest: %v (pages %q)", keys, pages)
	}
	var l sessionv1.ListItemsResponse
	if err := protojson.Unmarshal([]byte(cli(exitOK, "items", "--prefix", "w:")), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.GetMessages()) != 1 || l.GetMessages()[0].GetItemKey() != "w:1" || l.NextCursorSequence != nil {
		t.Fatalf("items --prefix w: %v", &l)
	}
}

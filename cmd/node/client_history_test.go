package main

import (
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// The history operations through the CLI: replace-suffix (and its retry
// with the same ids), delete-group, state update-scopes (and its retry).
func TestCLIHistoryOperations(t *testing.T) {
	addr, sid := startSessionForCLI(t, &sessionv1.CreateSessionRequest{ActorName: "cli", ClientKey: "t/1"})
	cli := cliRunner(t, addr)
	cli(exitOK, "session", "append", "--session", sid, "--message", "user=a", "--message", "assistant=b")
	const id = "01J00000000000000000000001"
	var r sessionv1.ReplaceSuffixResponse
	if err := protojson.Unmarshal([]byte(cli(exitOK, "session", "replace-suffix", "--session", sid, "--expect", "2", "--remove-last", "1",
		"--message", "assistant=B", "--message-id", id)), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.GetRemoved()) != 1 || r.GetRemoved()[0].GetContent() != "b" || r.GetNextSequence() != 2 || r.GetDuplicate() {
		t.Fatalf("replace-suffix: %v", &r)
	}
	if err := protojson.Unmarshal([]byte(cli(exitOK, "session", "replace-suffix", "--session", sid, "--expect", "2", "--remove-last", "1",
		"--message", "assistant=B", "--message-id", id)), &r); err != nil || !r.GetDuplicate() {
		t.Fatalf("retry: %v %v", &r, err)
	}
	cli(exitUsage, "session", "replace-suffix", "--session", sid, "--expect", "2")

	var u sessionv1.UpdateScopesResponse
	if err := protojson.Unmarshal([]byte(cli(exitOK, "session", "state", "update-scopes", "--scope", "app:cli", "--set", "k=1", "--request-id", "r1")), &u); err != nil || u.GetDuplicate() {
		t.Fatalf("update-scopes: %v %v", &u, err)
	}
	if err := protojson.Unmarshal([]byte(cli(exitOK, "session", "state", "update-scopes", "--scope", "app:cli", "--set", "k=1", "--request-id", "r1")), &u); err != nil || !u.GetDuplicate() {
		t.Fatalf("update-scopes retry: %v %v", &u, err)
	}

	var d sessionv1.DeleteSessionsResponse
	if err := protojson.Unmarshal([]byte(cli(exitOK, "session", "delete-group", "--prefix", "t/")), &d); err != nil || len(d.GetSessionIds()) != 1 || d.GetSessionIds()[0] != sid {
		t.Fatalf("delete-group: %v %v", &d, err)
	}
	cli(exitUsage, "session", "delete-group")
}

package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
)

// Exit statuses of the node command (cmd/node/exit.go).
const (
	exitFailure            = 1
	exitUsage              = 2
	exitInvalidArgument    = 3
	exitNotFound           = 4
	exitAlreadyExists      = 5
	exitFailedPrecondition = 6
	exitResourceExhausted  = 7
	exitUnauthenticated    = 9
)

const planID = "01JDQ6Z1V3T9Q2B8W4X5Y6Z7A8"

// TestCLICommands drives every client command against one node and checks
// what each printed against what the others wrote.
func TestCLICommands(t *testing.T) {
	n := startNode(t)
	var none []string

	// session create, get, list
	var created sessionv1.CreateSessionResponse
	n.cli(none, "session", "create", "--actor", "alice", "--namespace", "team", "--metadata", `{"k":"v"}`).ok(t, &created)
	sid := created.GetSession().GetSessionId()
	if !created.GetCreated() || created.GetSession().GetActorName() != "alice" || created.GetSession().GetNamespace() != "team" {
		t.Fatalf("create printed %v", &created)
	}
	var again sessionv1.CreateSessionResponse
	n.cli(none, "session", "create", "--id", sid, "--actor", "alice", "--namespace", "team", "--metadata", `{"k":"v"}`).ok(t, &again)
	if again.GetCreated() || again.GetSession().GetSessionId() != sid {
		t.Fatalf("idempotent create printed %v, want created=false for %s", &again, sid)
	}
	n.cli(none, "session", "create", "--id", sid, "--actor", "bob").fails(t, exitAlreadyExists, "ALREADY_EXISTS")

	var got sessionv1.GetSessionResponse
	n.cli(none, "session", "get", "--session", sid).ok(t, &got)
	if got.GetSession().GetMetadataJson() != `{"k":"v"}` {
		t.Fatalf("get printed metadata %q", got.GetSession().GetMetadataJson())
	}
	var other sessionv1.CreateSessionResponse
	n.cli(none, "session", "create", "--actor", "bob").ok(t, &other)
	var page1, page2 sessionv1.ListSessionsResponse
	n.cli(none, "session", "list", "--limit", "1", "--all").ok(t, &page1, &page2)
	if len(page1.GetSessions()) != 1 || len(page2.GetSessions()) != 1 ||
		page1.GetSessions()[0].GetSessionId() != sid || page2.GetSessions()[0].GetSessionId() != other.GetSession().GetSessionId() {
		t.Fatalf("list --all printed %v then %v; want one session per page in id order", &page1, &page2)
	}
	var byActor sessionv1.ListSessionsResponse
	n.cli(none, "session", "list", "--actor", "bob").ok(t, &byActor)
	if len(byActor.GetSessions()) != 1 || byActor.GetSessions()[0].GetActorName() != "bob" {
		t.Fatalf("list --actor bob printed %v", &byActor)
	}

	// session append: single, repeated --message, --file with ids (and its retry)
	var a1, a2, a3, a3again sessionv1.AppendResponse
	n.cli(none, "session", "append", "--session", sid, "--role", "user", "--content", "hello", "--metadata", `{"lang":"en"}`).ok(t, &a1)
	n.cli(none, "session", "append", "--session", sid, "--message", "assistant=hi there", "--message", "user=bye").ok(t, &a2)
	turn := filepath.Join(t.TempDir(), "turn.json")
	ids := []string{"01JDQ70000000000000000000A", "01JDQ70000000000000000000B"}
	writeFile(t, turn, `[{"role":"tool","content":"42","message_id":"`+ids[0]+`","metadata":{"tool":"calc"}},
		{"role":"assistant","content":"it is 42","message_id":"`+ids[1]+`"}]`)
	n.cli(none, "session", "append", "--session", sid, "--file", turn).ok(t, &a3)
	n.cli(none, "session", "append", "--session", sid, "--file", turn).ok(t, &a3again)
	seqs := func(r *sessionv1.AppendResponse) (s []int64) {
		for _, m := range r.GetMessages() {
			s = append(s, m.GetSequence())
		}
		return s
	}
	if want := "[0] [1 2] [3 4]"; fmtSeqs(seqs(&a1), seqs(&a2), seqs(&a3)) != want {
		t.Fatalf("append sequences %v %v %v, want %s", seqs(&a1), seqs(&a2), seqs(&a3), want)
	}
	if !a3again.GetDuplicate() || fmtSeqs(seqs(&a3again)) != "[3 4]" {
		t.Fatalf("retried append printed %v, want duplicate with sequences 3 and 4", &a3again)
	}

	// session messages (paged), usage, link-plan
	var m1, m2, m3 sessionv1.ListMessagesResponse
	r := n.cli(none, "session", "messages", "--session", sid, "--limit", "3", "--all").ok(t, &m1, &m2)
	var contents []string
	for _, page := range []*sessionv1.ListMessagesResponse{&m1, &m2} {
		for _, m := range page.GetMessages() {
			contents = append(contents, m.GetRole().String()+":"+m.GetContent())
		}
	}
	if want := "ROLE_USER:hello ROLE_ASSISTANT:hi there ROLE_USER:bye ROLE_TOOL:42 ROLE_ASSISTANT:it is 42"; strings.Join(contents, " ") != want {
		t.Fatalf("messages --all printed %q, want %q (%d lines)", strings.Join(contents, " "), want, len(r.lines()))
	}
	n.cli(none, "session", "messages", "--session", sid, "--from", "4").ok(t, &m3)
	if len(m3.GetMessages()) != 1 || m3.GetMessages()[0].GetMessageId() != ids[1] {
		t.Fatalf("messages --from 4 printed %v", &m3)
	}
	var usage sessionv1.UpdateTokenUsageResponse
	n.cli(none, "session", "usage", "--session", sid, "--input-tokens", "10", "--output-tokens", "5", "--cost", "0.5").ok(t, &usage)
	n.cli(none, "session", "usage", "--session", sid, "--input-tokens", "1").ok(t, &usage)
	if usage.GetTotal().GetInputTokens() != 11 || usage.GetTotal().GetOutputTokens() != 5 || usage.GetTotal().GetCost() != 0.5 {
		t.Fatalf("usage totals %v, want 11/5/0.5", usage.GetTotal())
	}
	var linked sessionv1.LinkPlanResponse
	n.cli(none, "session", "link-plan", "--session", sid, "--plan", planID, "--phase", "execute", "--state", "processing").ok(t, &linked)
	if lp := linked.GetSession().GetLinkedPlans(); len(lp) != 1 || lp[0].GetPlanId() != planID {
		t.Fatalf("link-plan printed %v", &linked)
	}

	// session export, import: --out streams a JSON Lines file (header,
	// messages, trailer); without it the single document is printed, and
	// import takes either.
	exported := filepath.Join(t.TempDir(), "export.jsonl")
	var exp sessionv1.ExportSessionResponse
	n.cli(none, "session", "export", "--session", sid, "--out", exported).ok(t, &exp)
	lines := strings.Split(strings.TrimSuffix(readFile(t, exported), "\n"), "\n")
	if !strings.HasPrefix(exp.GetChecksum(), "sha256:") || len(lines) != 7 || lines[6] != `{"checksum":"`+exp.GetChecksum()+`"}` {
		t.Fatalf("export printed checksum %q; the file must end with it after 5 message lines: %q", exp.GetChecksum(), lines)
	}
	var single sessionv1.ExportSessionResponse
	n.cli(none, "session", "export", "--session", sid).ok(t, &single)
	if single.GetChecksum() != exp.GetChecksum() {
		t.Fatalf("the single document's checksum %s differs from the stream's %s", single.GetChecksum(), exp.GetChecksum())
	}
	singleFile := filepath.Join(t.TempDir(), "export.json")
	writeFile(t, singleFile, single.GetData())
	var newID string
	for _, f := range []string{singleFile, exported} {
		var imp sessionv1.ImportSessionResponse
		n.cli(none, "session", "import", "--file", f).ok(t, &imp)
		newID = imp.GetSession().GetSessionId()
		if newID == sid || imp.GetMessagesImported() != 5 || imp.GetChecksum() != exp.GetChecksum() {
			t.Fatalf("import of %s printed %v; want a new session with 5 messages", filepath.Base(f), &imp)
		}
		var impMsgs sessionv1.ListMessagesResponse
		n.cli(none, "session", "messages", "--session", newID).ok(t, &impMsgs)
		if len(impMsgs.GetMessages()) != 5 || impMsgs.GetMessages()[3].GetContent() != "42" {
			t.Fatalf("imported session's messages: %v", &impMsgs)
		}
	}
	writeFile(t, exported, strings.Replace(readFile(t, exported), "it is 42", "it is 43", 1))
	n.cli(none, "session", "import", "--file", exported).fails(t, exitInvalidArgument, "INVALID_ARGUMENT")
	writeFile(t, singleFile, strings.Replace(single.GetData(), "it is 42", "it is 43", 1))
	n.cli(none, "session", "import", "--file", singleFile).fails(t, exitInvalidArgument, "INVALID_ARGUMENT")

	// session close, then append is refused; delete
	var closed sessionv1.CloseSessionResponse
	n.cli(none, "session", "close", "--session", sid).ok(t, &closed)
	if closed.GetSession().GetState() != sessionv1.SessionState_SESSION_STATE_CLOSED {
		t.Fatalf("close printed %v", &closed)
	}
	n.cli(none, "session", "append", "--session", sid, "--role", "user", "--content", "late").
		fails(t, exitFailedPrecondition, "FAILED_PRECONDITION")
	var del sessionv1.DeleteSessionResponse
	n.cli(none, "session", "delete", "--session", newID, "--yes").ok(t, &del)
	if del.GetMessagesRemoved() != 5 {
		t.Fatalf("delete printed %v, want 5 messages removed", &del)
	}
	n.cli(none, "session", "get", "--session", newID).fails(t, exitNotFound, "NOT_FOUND")

	// plan policy, record-error, history, details, record-success, merge-details
	var pol planv1.SetPolicyResponse
	n.cli(none, "plan", "policy", "--plan", planID, "--max-retries", "2").ok(t, &pol)
	if pol.GetMaxRetries() != 2 {
		t.Fatalf("policy printed %v", &pol)
	}
	var e1, e2 planv1.RecordErrorResponse
	n.cli(none, "plan", "record-error", "--plan", planID, "--phase", "execute", "--step", "s1", "--type", "TimeoutError", "--message", "slow").ok(t, &e1)
	n.cli(none, "plan", "record-error", "--plan", planID, "--phase", "execute", "--step", "s1", "--type", "TimeoutError", "--message", "slow again").ok(t, &e2)
	if e1.GetRecord().GetSequence() != 0 || e2.GetRecord().GetSequence() != 1 || e2.GetRecord().GetRetryCount() != 2 ||
		e2.GetRecord().GetMaxRetries() != 2 || e2.GetRecord().GetCategory() != planv1.ErrorCategory_ERROR_CATEGORY_TRANSIENT {
		t.Fatalf("record-error printed %v then %v", e1.GetRecord(), e2.GetRecord())
	}
	var hist planv1.HistoryResponse
	n.cli(none, "plan", "history", "--plan", planID, "--phase", "execute", "--category", "transient").ok(t, &hist)
	if len(hist.GetRecords()) != 2 || hist.GetRecords()[1].GetMessage() != "slow again" {
		t.Fatalf("history printed %v", &hist)
	}
	var details planv1.ErrorDetailsResponse
	n.cli(none, "plan", "details", "--plan", planID).ok(t, &details)
	if details.GetDetails().GetRetryCount() != 2 || details.GetMaxRetries() != 2 {
		t.Fatalf("details printed %v", &details)
	}
	var succ planv1.RecordSuccessResponse
	n.cli(none, "plan", "record-success", "--plan", planID, "--phase", "execute", "--step", "s1").ok(t, &succ)
	if succ.GetPreviousRetryCount() != 2 {
		t.Fatalf("record-success printed %v, want previous retry count 2", &succ)
	}
	var merged planv1.MergeErrorDetailsResponse
	n.cli(none, "plan", "merge-details", "--plan", planID, "--details", `{"operator_note":"looked at it"}`).ok(t, &merged)
	if !strings.Contains(merged.GetDetailsJson(), "operator_note") {
		t.Fatalf("merge-details printed %v", &merged)
	}
	n.cli(none, "plan", "record-error", "--plan", planID, "--phase", "apply", "--type", "X", "--attributes", "[1,2]").
		fails(t, exitInvalidArgument, "INVALID_ARGUMENT")

	// audit record, flush, list, count, get, verify, prune
	var rec auditv1.RecordResponse
	n.cli(none, "audit", "record", "--type", "config_changed", "--actor", "ops", "--details", `{"api_key":"hunter2","k":1}`).ok(t, &rec)
	if strings.Contains(rec.GetEntry().GetDetailsJson(), "hunter2") {
		t.Fatalf("audit record kept a secret: %s", rec.GetEntry().GetDetailsJson())
	}
	// agentstate's own types are written by agentstate only: a caller's
	// session_deleted would attest a deletion that never happened.
	n.cli(none, "audit", "record", "--type", "session_deleted", "--session", "01JDQ7ZZZZZZZZZZZZZZZZZZZZ").
		fails(t, exitInvalidArgument, "INVALID_ARGUMENT")
	n.cli(none, "audit", "flush").ok(t)
	var all auditv1.ListResponse
	n.cli(none, "audit", "list", "--limit", "1000").ok(t, &all)
	types := map[string]int{}
	for _, e := range all.GetEntries() {
		types[e.GetEventType()]++
	}
	for _, want := range []string{"session_created", "session_closed", "session_deleted", "session_imported",
		"plan_error_recorded", "plan_policy_set", "config_changed"} {
		if types[want] == 0 {
			t.Errorf("audit list has no %s entry; it has %v", want, types)
		}
	}
	if types["session_deleted"] != 1 {
		t.Errorf("audit list has %d session_deleted entries, want 1 (the real deletion); it has %v", types["session_deleted"], types)
	}
	var cnt auditv1.CountResponse
	n.cli(none, "audit", "count", "--type", "plan_error_recorded", "--plan", planID).ok(t, &cnt)
	if cnt.GetCount() != 2 {
		t.Fatalf("audit count printed %v, want 2", &cnt)
	}
	var one auditv1.GetResponse
	n.cli(none, "audit", "get", "--id", rec.GetEntry().GetEventId()).ok(t, &one)
	if one.GetEntry().GetActorName() != "ops" || one.GetEntry().GetHash() == "" {
		t.Fatalf("audit get printed %v", &one)
	}
	var ver auditv1.VerifyResponse
	n.cli(none, "audit", "verify").ok(t, &ver)
	if !ver.GetOk() || ver.GetEntriesChecked() != int64(len(all.GetEntries())) {
		t.Fatalf("verify printed %v; want ok over %d entries", &ver, len(all.GetEntries()))
	}
	var pr auditv1.PruneResponse
	n.cli(none, "audit", "prune", "--older-than", time.Now().Add(time.Hour).Format(time.RFC3339)).ok(t, &pr)
	if pr.GetRemoved() < int64(len(all.GetEntries())) {
		t.Fatalf("prune printed %v, want at least %d removed", &pr, len(all.GetEntries()))
	}
	n.cli(none, "audit", "verify").ok(t, &ver)
	if !ver.GetOk() {
		t.Fatalf("verify after prune printed %v", &ver)
	}
	n.cli(none, "audit", "get", "--id", rec.GetEntry().GetEventId()).fails(t, exitNotFound, "NOT_FOUND")

	// A bad command line is a usage error, not a request.
	if r := n.cli(none, "session", "get"); r.code != exitUsage {
		t.Fatalf("session get without --session: exit %d, want %d", r.code, exitUsage)
	}
}

// TestCLIRecordErrorRecordID: a retried `plan record-error --record-id`
// prints the stored record with duplicate true and stores nothing; the same
// id on another plan and a malformed id are refused with their own exit
// statuses.
func TestCLIRecordErrorRecordID(t *testing.T) {
	n := startNode(t)
	var none []string
	plan, otherPlan, recID := ids.New(), ids.New(), ids.New()
	recordError := func(onPlan, recordID, msg string) cliResult {
		return n.cli(none, "plan", "record-error", "--plan", onPlan, "--phase", "execute", "--step", "s1",
			"--type", "TimeoutError", "--message", msg, "--record-id", recordID)
	}

	var first, retry planv1.RecordErrorResponse
	r1 := recordError(plan, recID, "slow").ok(t, &first)
	r2 := recordError(plan, recID, "slow").ok(t, &retry)
	// The flag must be printed, not merely default to false when decoded.
	if d, ok := duplicateField(t, r1); !ok || d {
		t.Fatalf("first record-error printed duplicate=%v (present %v), want an explicit false:\n%s", d, ok, r1.stdout)
	}
	if d, ok := duplicateField(t, r2); !ok || !d {
		t.Fatalf("retried record-error printed duplicate=%v (present %v), want true:\n%s", d, ok, r2.stdout)
	}
	a, b := first.GetRecord(), retry.GetRecord()
	if a.GetRecordId() != recID || b.GetRecordId() != recID || a.GetSequence() != 0 || b.GetSequence() != 0 ||
		b.GetMessage() != "slow" || b.GetRetryCount() != a.GetRetryCount() {
		t.Fatalf("record-error printed %v then %v; want record %s at sequence 0 both times, the retry showing the original",
			a, b, recID)
	}
	var hist planv1.HistoryResponse
	n.cli(none, "plan", "history", "--plan", plan).ok(t, &hist)
	if len(hist.GetRecords()) != 1 || hist.GetRecords()[0].GetRecordId() != recID {
		t.Fatalf("history after a retried record-error printed %v, want the one record %s", &hist, recID)
	}

	recordError(otherPlan, recID, "elsewhere").fails(t, exitAlreadyExists, "ALREADY_EXISTS")
	// The same id with another message is no retry.
	recordError(plan, recID, "slow (retried)").fails(t, exitAlreadyExists, "ALREADY_EXISTS")
	recordError(plan, "not-a-ulid", "slow").fails(t, exitInvalidArgument, "INVALID_ARGUMENT")
	n.cli(none, "plan", "history", "--plan", plan).ok(t, &hist)
	if len(hist.GetRecords()) != 1 {
		t.Fatalf("refused record-errors stored something: history %v", &hist)
	}
}

// duplicateField decodes the "duplicate" field of a RecordErrorResponse
// line as printed, reporting whether the line carries it at all.
func duplicateField(t *testing.T, r cliResult) (dup, present bool) {
	t.Helper()
	var line map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.lines()[0]), &line); err != nil {
		t.Fatalf("node %v printed %q: %v", r.args, r.stdout, err)
	}
	raw, present := line["duplicate"]
	if !present {
		return false, false
	}
	if err := json.Unmarshal(raw, &dup); err != nil {
		t.Fatalf("node %v printed duplicate %s: %v", r.args, raw, err)
	}
	return dup, true
}

// TestCLIEnvironment: the client takes its flags from AGENTSTATE_*, the
// command line wins, and a node that is not there is UNAVAILABLE (exit 8).
func TestCLIEnvironment(t *testing.T) {
	n := startNode(t)
	var created sessionv1.CreateSessionResponse
	runCLI(t, []string{"AGENTSTATE_ADDR=" + n.grpcAddr()}, "session", "create", "--actor", "env").ok(t, &created)
	if created.GetSession().GetActorName() != "env" {
		t.Fatalf("create through AGENTSTATE_ADDR printed %v", &created)
	}
	// Per-request flags ignore the environment: AGENTSTATE_ACTOR does not
	// filter the list, AGENTSTATE_CONTENT does not fill a forgotten --content.
	stray := []string{"AGENTSTATE_ADDR=" + n.grpcAddr(), "AGENTSTATE_ACTOR=nobody", "AGENTSTATE_CONTENT=stray"}
	var listed sessionv1.ListSessionsResponse
	runCLI(t, stray, "session", "list").ok(t, &listed)
	if len(listed.GetSessions()) != 1 || listed.GetSessions()[0].GetActorName() != "env" {
		t.Fatalf("list with AGENTSTATE_ACTOR exported printed %v; want the unfiltered list", &listed)
	}
	sid := created.GetSession().GetSessionId()
	r := runCLI(t, stray, "session", "append", "--session", sid, "--role", "user")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--content") {
		t.Fatalf("append without --content: exit %d, stderr %q; want %d naming --content", r.code, r.stderr, exitUsage)
	}
	var empty sessionv1.AppendResponse
	runCLI(t, stray, "session", "append", "--session", sid, "--role", "user", "--content", "").ok(t, &empty)
	var msgs sessionv1.ListMessagesResponse
	runCLI(t, stray, "session", "messages", "--session", sid).ok(t, &msgs)
	if len(msgs.GetMessages()) != 1 || msgs.GetMessages()[0].GetContent() != "" {
		t.Fatalf("after one refused and one explicit empty append, messages are %v; want one empty message", &msgs)
	}

	env := []string{"AGENTSTATE_ADDR=" + n.grpcAddr(), "AGENTSTATE_TIMEOUT=2s"}
	runCLI(t, env, "session", "list", "--addr", "127.0.0.1:1").fails(t, 8, "UNAVAILABLE")
}

func fmtSeqs(s ...[]int64) string {
	var parts []string
	for _, x := range s {
		var p []string
		for _, v := range x {
			p = append(p, strconv.FormatInt(v, 10))
		}
		parts = append(parts, "["+strings.Join(p, " ")+"]")
	}
	return strings.Join(parts, " ")
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

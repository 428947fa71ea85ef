package session_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"google.golang.org/protobuf/proto"
)

// resealed returns an export's data with old replaced by new and a
// checksum that matches again, as any client could make it.
func resealed(t *testing.T, ex *sessionv1.ExportSessionResponse, old, new string) string {
	t.Helper()
	canon := strings.TrimSuffix(ex.GetData(), `,"checksum":"`+ex.GetChecksum()+`"}`) + "}"
	if !strings.Contains(canon, old) {
		t.Fatalf("export lacks %s", old)
	}
	c := strings.Replace(canon, old, new, 1)
	sum := sha256.Sum256([]byte(c))
	return strings.TrimSuffix(c, "}") + `,"checksum":"` + hex.EncodeToString(sum[:]) + `"}`
}

// nestedObject nests depth levels: {"a":{"a":...{}}}.
func nestedObject(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

func wantDepthRefused(t *testing.T, err error) {
	t.Helper()
	wantCode(t, err, errs.InvalidArgumentCode)
	if !strings.Contains(err.Error(), "limit of 128 levels") {
		t.Fatalf("refused for another reason: %v", err)
	}
}

// Deeply nested JSON is refused as INVALID_ARGUMENT naming the limit, at
// any depth, wherever it comes: as the whole export, inside it, on a line
// of an export file; nothing of it is stored. A value at the limit is
// stored, and exports and imports again.
func TestImportRefusesDeepNesting(t *testing.T) {
	nd := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id, _ := exportFixture(t, nd)
	ex, err := nd.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, depth := range []int{jsonobj.MaxDepth + 1, 30_000, 100_000} {
		deep := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		_, err := nd.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: deep})
		wantDepthRefused(t, err)
		_, err = nd.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: resealed(t, ex, `"linked_plans":[`, `"linked_plans":[`+deep+",")})
		wantDepthRefused(t, err)
	}

	var file strings.Builder
	if _, err := nd.svc.ExportFile(ctx, &sessionv1.ExportSessionRequest{SessionId: id}, &file); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(file.String(), "\n")
	deep := strings.Repeat(`{"a":`, 30_000)
	for i, want := range map[int]string{0: "line 1:", 2: "line 3:"} {
		edited := append([]string(nil), lines...)
		edited[i] = strings.Replace(edited[i], `{`, `{"x":`+deep+`1`+strings.Repeat("}", 30_000)+`,`, 1)
		_, err := nd.svc.ImportFile(ctx, strings.NewReader(strings.Join(edited, "")))
		wantDepthRefused(t, err)
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("line %d too deep: %v; want %s", i+1, err, want)
		}
	}
	noneStaged(t, nd, 1)

	// Metadata and state values: the limit is accepted, one more refused.
	_, err = nd.svc.Create(ctx, &sessionv1.CreateSessionRequest{MetadataJson: nestedObject(jsonobj.MaxDepth + 1)})
	wantDepthRefused(t, err)
	_, err = nd.svc.Create(ctx, &sessionv1.CreateSessionRequest{StateDelta: delta("k", nestedObject(jsonobj.MaxDepth+1))})
	wantDepthRefused(t, err)
	c, err := nd.svc.Create(ctx, &sessionv1.CreateSessionRequest{MetadataJson: nestedObject(jsonobj.MaxDepth),
		StateDelta: delta("k", nestedObject(jsonobj.MaxDepth))})
	if err != nil {
		t.Fatalf("JSON nesting %d levels (the limit): %v", jsonobj.MaxDepth, err)
	}
	deepID := c.GetSession().GetSessionId()
	_, err = nd.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: deepID,
		Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, MetadataJson: nestedObject(jsonobj.MaxDepth + 1)}}})
	wantDepthRefused(t, err)
	if _, err := nd.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: deepID,
		Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, MetadataJson: nestedObject(jsonobj.MaxDepth)}}}); err != nil {
		t.Fatal(err)
	}
	deepEx, err := nd.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: deepID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nd.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: deepEx.GetData()}); err != nil {
		t.Fatalf("the export of values at the limit does not import: %v", err)
	}
	// The state object is one level around its values: its export nests
	// one level more than a value may, and no more.
	stateJSON := func(value string) string {
		b, _ := json.Marshal(`{"k":` + value + `}`)
		return `"state_json":` + string(b)
	}
	_, err = nd.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: resealed(t, deepEx,
		stateJSON(nestedObject(jsonobj.MaxDepth)), stateJSON(nestedObject(jsonobj.MaxDepth+1)))})
	wantDepthRefused(t, err)
	noneStaged(t, nd, 3)
}

// An import whose session.state no export writes is refused, by each way
// in; nothing of it is stored.
func TestImportRefusesUnknownState(t *testing.T) {
	nd := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id, _ := exportFixture(t, nd)
	ex, err := nd.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"archived", "", "ACTIVE", "staged"} {
		_, err := nd.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: resealed(t, ex, `"state":"active"`, `"state":"`+state+`"`)})
		wantCode(t, err, errs.InvalidArgumentCode)
		if !strings.Contains(err.Error(), "session.state") {
			t.Fatalf("state %q refused for another reason: %v", state, err)
		}
	}
	if _, err := nd.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: resealed(t, ex, `"state":"active"`, `"state":"closed"`)}); err != nil {
		t.Fatalf("a closed session's export is refused: %v", err)
	}
	for _, state := range []sessionv1.SessionState{sessionv1.SessionState_SESSION_STATE_UNSPECIFIED, 99} {
		chunks := exportChunks(t, nd, id)
		h := proto.Clone(chunks[0].GetHeader()).(*sessionv1.ExportHeader)
		h.Session.State = state
		chunks[0] = &sessionv1.ImportChunk{Part: &sessionv1.ImportChunk_Header{Header: h}}
		_, err := nd.svc.ImportFrom(ctx, feed(chunks))
		wantCode(t, err, errs.InvalidArgumentCode)
		if !strings.Contains(err.Error(), "session.state") {
			t.Fatalf("state %v refused for another reason: %v", state, err)
		}
	}
	noneStaged(t, nd, 2)
}

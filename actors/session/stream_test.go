package session_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A single-document import reads exactly what its text shows: each edit
// below keeps the checksum valid for a case-insensitive, last-key-wins
// decoder (the decoded value, re-encoded, is the original export), so only
// the strict parse refuses it.
func TestImportIsStrict(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id, _ := exportFixture(t, n)
	ex, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	data := ex.GetData()
	for name, edit := range map[string][2]string{
		"duplicate key":          {`"messages":[`, `"messages":[],"messages":[`},
		"case variant":           {`"messages":`, `"MESSAGES":`},
		"case variant, escaped":  {`"messages":`, `"MESS\u0041GES":`},
		"duplicate nested key":   {`"role":"system"`, `"role":"user","role":"system"`},
		"case variant, nested":   {`"content":"be brief"`, `"Content":"be brief"`},
		"duplicate session key":  {`"actor_name":"coder"`, `"actor_name":"x","actor_name":"coder"`},
		"unknown nested field":   {`"plan_id":`, `"owner":"x","plan_id":`},
		"duplicate checksum key": {`,"checksum":`, `,"checksum":"sha256:00","checksum":`},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(data, edit[0]) {
				t.Fatalf("export lacks %s", edit[0])
			}
			_, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: strings.Replace(data, edit[0], edit[1], 1)})
			wantCode(t, err, errs.InvalidArgumentCode)
		})
	}
	// Escapes in a key are not a variant: the key is what they decode to.
	if _, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: strings.Replace(data, `"messages":`, `"m\u0065ssages":`, 1)}); err != nil {
		t.Fatalf("an escaped exact key is refused: %v", err)
	}
}

// bigSession makes a session of n messages of size bytes each, in turns of
// 1000.
func bigSession(t *testing.T, nd *node, n, size int) string {
	ctx := ctxT(t)
	id := nd.create(t, "big")
	body := strings.Repeat("b", size)
	for done := 0; done < n; {
		turn := make([]*sessionv1.NewMessage, 0, 1000)
		for ; done < n && len(turn) < 1000; done++ {
			turn = append(turn, &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprintf("%d %s", done, body)})
		}
		if _, err := nd.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: turn}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nd.svc.LinkPlan(ctx, &sessionv1.LinkPlanRequest{SessionId: id, Plan: &sessionv1.LinkedPlan{PlanId: ids.New(), Phase: "execute"}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// exportChunks collects a session's ExportTo chunks, as ImportChunks.
func exportChunks(t *testing.T, nd *node, id string) []*sessionv1.ImportChunk {
	var out []*sessionv1.ImportChunk
	err := nd.svc.ExportTo(ctxT(t), &sessionv1.ExportSessionRequest{SessionId: id}, func(c *sessionv1.ExportChunk) error {
		ic := &sessionv1.ImportChunk{}
		switch p := c.GetPart().(type) {
		case *sessionv1.ExportChunk_Header:
			ic.Part = &sessionv1.ImportChunk_Header{Header: p.Header}
		case *sessionv1.ExportChunk_Page:
			ic.Part = &sessionv1.ImportChunk_Page{Page: p.Page}
		case *sessionv1.ExportChunk_Trailer:
			ic.Part = &sessionv1.ImportChunk_Trailer{Trailer: p.Trailer}
		}
		out = append(out, ic)
		return nil
	})
	if err != nil {
		t.Fatalf("ExportTo: %v", err)
	}
	return out
}

func feed(chunks []*sessionv1.ImportChunk) func() (*sessionv1.ImportChunk, error) {
	return func() (*sessionv1.ImportChunk, error) {
		if len(chunks) == 0 {
			return nil, io.EOF
		}
		c := chunks[0]
		chunks = chunks[1:]
		return c, nil
	}
}

// noneStaged asserts that nothing of a failed import is left, visible or not.
func noneStaged(t *testing.T, nd *node, sessions int) {
	t.Helper()
	staged, err := nd.store.Reader().ListSessions(ctxT(t), persistence.SessionFilter{State: persistence.SessionStateStaged})
	if err != nil || len(staged) != 0 {
		t.Fatalf("staged sessions left: %v, %v", staged, err)
	}
	all, err := nd.svc.List(ctxT(t), &sessionv1.ListSessionsRequest{Limit: 1000})
	if err != nil || len(all.GetSessions()) != sessions {
		t.Fatalf("%d sessions visible (%v); want %d", len(all.GetSessions()), err, sessions)
	}
}

// A session too large for one reply streams: many bounded pages, a
// checksum that the import verifies, and a copy whose messages export
// exactly as the original's. The unary Export refuses it with
// RESOURCE_EXHAUSTED instead of a reply no default client accepts.
func TestExportImportStream(t *testing.T) {
	nd := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	const count = 30000
	id := bigSession(t, nd, count, 200)

	_, err := nd.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	wantCode(t, err, errs.ResourceExhaustedCode)
	if !strings.Contains(err.Error(), "ExportStream") {
		t.Fatalf("the refusal does not point to the stream: %v", err)
	}

	chunks := exportChunks(t, nd, id)
	if len(chunks) < 2+count/1000 {
		t.Fatalf("%d chunks for %d messages", len(chunks), count)
	}
	for _, c := range chunks[1 : len(chunks)-1] {
		if sz := proto.Size(c); sz > persistence.MaxPageBytes+64<<10 {
			t.Fatalf("a page of %d bytes", sz)
		}
	}
	sum := chunks[len(chunks)-1].GetTrailer().GetChecksum()
	im, err := nd.svc.ImportFrom(ctx, feed(chunks))
	if err != nil {
		t.Fatalf("ImportFrom: %v", err)
	}
	if im.GetMessagesImported() != count || im.GetChecksum() != sum {
		t.Fatalf("imported %d messages with checksum %s; want %d, %s", im.GetMessagesImported(), im.GetChecksum(), count, sum)
	}
	nid := im.GetSession().GetSessionId()
	if got := nd.get(t, nid); got.GetMessageCount() != count || len(got.GetLinkedPlans()) != 1 {
		t.Fatalf("imported session %v", got)
	}
	// The copy's pages carry the original's messages.
	copied := exportChunks(t, nd, nid)
	var a, b []*sessionv1.Message
	for _, c := range chunks {
		a = append(a, c.GetPage().GetMessages()...)
	}
	for _, c := range copied {
		b = append(b, c.GetPage().GetMessages()...)
	}
	if len(a) != count || len(b) != count {
		t.Fatalf("%d and %d messages exported", len(a), len(b))
	}
	for i := range a {
		if a[i].GetMessageId() != b[i].GetMessageId() || a[i].GetContent() != b[i].GetContent() ||
			a[i].GetSequence() != b[i].GetSequence() || !a[i].GetCreatedAt().AsTime().Equal(b[i].GetCreatedAt().AsTime()) {
			t.Fatalf("message %d differs: %v vs %v", i, a[i], b[i])
		}
	}
	// The stream's checksum is the single document's.
	small := nd.create(t, "small")
	if _, err := nd.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: small, Messages: []*sessionv1.NewMessage{userMsg("x")}}); err != nil {
		t.Fatal(err)
	}
	one, err := nd.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: small})
	if err != nil {
		t.Fatal(err)
	}
	sc := exportChunks(t, nd, small)
	if got := sc[len(sc)-1].GetTrailer().GetChecksum(); got != one.GetChecksum() {
		t.Fatalf("stream checksum %s, single document %s", got, one.GetChecksum())
	}
}

// A streamed import that fails at any point — after batches were stored —
// leaves nothing behind, visible or staged.
func TestImportStreamFailureLeavesNothing(t *testing.T) {
	nd := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	const count = 5000
	id := bigSession(t, nd, count, 10)
	chunks := exportChunks(t, nd, id)
	last := len(chunks) - 1

	edit := func(f func(cs []*sessionv1.ImportChunk) []*sessionv1.ImportChunk) []*sessionv1.ImportChunk {
		cs := make([]*sessionv1.ImportChunk, len(chunks))
		for i, c := range chunks {
			cs[i] = proto.CloneOf(c)
		}
		return f(cs)
	}
	cases := map[string]struct {
		chunks []*sessionv1.ImportChunk
		code   errs.Code
	}{
		"checksum mismatch": {edit(func(cs []*sessionv1.ImportChunk) []*sessionv1.ImportChunk {
			cs[3].GetPage().Messages[0].Content = "tampered"
			return cs
		}), errs.InvalidArgumentCode},
		"message id repeated in another batch": {edit(func(cs []*sessionv1.ImportChunk) []*sessionv1.ImportChunk {
			cs[4].GetPage().Messages[0].MessageId = cs[1].GetPage().GetMessages()[0].GetMessageId()
			return cs
		}), errs.InvalidArgumentCode},
		"fewer messages than counted": {edit(func(cs []*sessionv1.ImportChunk) []*sessionv1.ImportChunk {
			return append(cs[:last-1], cs[last])
		}), errs.InvalidArgumentCode},
		"no trailer": {edit(func(cs []*sessionv1.ImportChunk) []*sessionv1.ImportChunk {
			return cs[:last]
		}), errs.InvalidArgumentCode},
		"content after the trailer": {edit(func(cs []*sessionv1.ImportChunk) []*sessionv1.ImportChunk {
			return append(cs, cs[1])
		}), errs.InvalidArgumentCode},
		"a page before the header": {edit(func(cs []*sessionv1.ImportChunk) []*sessionv1.ImportChunk {
			return cs[1:]
		}), errs.InvalidArgumentCode},
		"a field the node does not know": {edit(func(cs []*sessionv1.ImportChunk) []*sessionv1.ImportChunk {
			unknown := protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)
			cs[2].GetPage().Messages[3].ProtoReflect().SetUnknown(unknown)
			return cs
		}), errs.InvalidArgumentCode},
		"invalid message": {edit(func(cs []*sessionv1.ImportChunk) []*sessionv1.ImportChunk {
			cs[2].GetPage().Messages[5].Role = 0
			return cs
		}), errs.InvalidArgumentCode},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := nd.svc.ImportFrom(ctx, feed(c.chunks))
			wantCode(t, err, c.code)
			noneStaged(t, nd, 1)
		})
	}
	t.Run("the client leaves", func(t *testing.T) {
		broken := errors.New("connection reset")
		next := feed(chunks[:last-2])
		_, err := nd.svc.ImportFrom(ctx, func() (*sessionv1.ImportChunk, error) {
			c, err := next()
			if err == io.EOF {
				return nil, broken
			}
			return c, err
		})
		if err == nil {
			t.Fatal("an import whose client left succeeded")
		}
		noneStaged(t, nd, 1)
	})
}

// An import whose importer died (kill -9) leaves a staged session that no
// read shows; the sweep removes it once it is idle for ImportIdleTimeout,
// and leaves younger ones (an import in progress) alone.
func TestSweepRemovesAbandonedImports(t *testing.T) {
	nd := startNode(t, memURL(t), session.Config{ImportIdleTimeout: time.Hour}, nil)
	ctx := ctxT(t)
	<-session.FirstSweep(nd.svc) // else it may fence this test's sweep of the session it staged
	stage := func(updated time.Time) string {
		id := ids.New()
		ts := timestamppb.New(updated)
		res, err := nd.wr.Apply(ctx, &persistence.CreateSession{Session: &sessionv1.Session{
			SessionId: id, ActorName: "a", Namespace: "local", State: persistence.SessionStateStaged, CreatedAt: ts, UpdatedAt: ts,
		}, Messages: []*sessionv1.Message{{MessageId: ids.New(), Role: sessionv1.Role_ROLE_USER, Content: "x", CreatedAt: ts}}})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	old, young := stage(time.Now().Add(-2*time.Hour)), stage(time.Now())
	if err := session.SweepStaged(ctx, nd.svc, time.Hour); err != nil {
		t.Fatal(err)
	}
	staged, err := nd.store.Reader().ListSessions(ctx, persistence.SessionFilter{State: persistence.SessionStateStaged})
	if err != nil || len(staged) != 1 || staged[0].GetSessionId() != young {
		t.Fatalf("after the sweep: %v, %v; want only %s (not %s)", staged, err, young, old)
	}
	if _, err := nd.svc.Get(ctx, &sessionv1.GetSessionRequest{SessionId: young}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("a staged session reads: %v", err)
	}
}

// The export file round-trips through ImportFile; its lines are parsed as
// strictly as a single document.
func TestExportFile(t *testing.T) {
	nd := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := bigSession(t, nd, 2500, 20)
	var file strings.Builder
	sum, err := nd.svc.ExportFile(ctx, &sessionv1.ExportSessionRequest{SessionId: id}, &file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(file.String(), "\n"), "\n")
	if len(lines) != 2502 || !strings.HasPrefix(lines[0], `{"format":"jsonl","schema_version":"agentstate.session/1",`) ||
		lines[2501] != `{"checksum":"`+sum+`"}` {
		t.Fatalf("%d lines; first %.80s; last %s", len(lines), lines[0], lines[len(lines)-1])
	}
	im, err := nd.svc.ImportFile(ctx, strings.NewReader(file.String()))
	if err != nil || im.GetMessagesImported() != 2500 || im.GetChecksum() != sum {
		t.Fatalf("ImportFile: %v, %v", im, err)
	}
	var again strings.Builder
	if _, err := nd.svc.ExportFile(ctx, &sessionv1.ExportSessionRequest{SessionId: im.GetSession().GetSessionId()}, &again); err != nil {
		t.Fatal(err)
	}
	relines := strings.Split(strings.TrimSuffix(again.String(), "\n"), "\n")
	if strings.Join(relines[1:2501], "\n") != strings.Join(lines[1:2501], "\n") {
		t.Fatal("the copy's message lines differ from the original's")
	}

	edited := func(line int, old, new string) string {
		ls := append([]string(nil), lines...)
		if !strings.Contains(ls[line], old) {
			t.Fatalf("line %d lacks %s", line, old)
		}
		ls[line] = strings.Replace(ls[line], old, new, 1)
		return strings.Join(ls, "\n") + "\n"
	}
	for name, f := range map[string]string{
		"duplicate key":        edited(5, `"role":"user"`, `"role":"system","role":"user"`),
		"case variant":         edited(5, `"content":`, `"CONTENT":`),
		"unknown field":        edited(5, `"content":`, `"extra":1,"content":`),
		"header duplicate key": edited(0, `"linked_plans":`, `"linked_plans":[],"linked_plans":`),
		"tampered content":     edited(5, `"content":"4 `, `"content":"5 `),
		"time not as exported": edited(5, `Z"`, `+00:00"`),
		"truncated":            strings.Join(lines[:2000], "\n") + "\n",
		"content after":        file.String() + "{}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := nd.svc.ImportFile(ctx, strings.NewReader(f))
			wantCode(t, err, errs.InvalidArgumentCode)
			noneStaged(t, nd, 2)
		})
	}
}

// An importer too slow for the sweep is fenced out by it: its next write
// fails, it answers UNAVAILABLE, and nothing of the import remains — the
// sweep cannot leave a half-removed session for the importer to make
// active.
func TestSweepFencesASlowImporter(t *testing.T) {
	nd := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := bigSession(t, nd, 3000, 10)
	chunks := exportChunks(t, nd, id)
	next := feed(chunks)
	sent := 0
	_, err := nd.svc.ImportFrom(ctx, func() (*sessionv1.ImportChunk, error) {
		if sent++; sent == 3 {
			// Two pages are staged (one batch each): the importer now
			// stalls, and the sweep finds its staged session idle.
			if err := session.SweepStaged(ctx, nd.svc, -time.Hour); err != nil {
				t.Errorf("sweep: %v", err)
			}
		}
		return next()
	})
	wantCode(t, err, errs.UnavailableCode)
	noneStaged(t, nd, 1)
}

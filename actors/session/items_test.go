package session_test

import (
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
)

func keyedMsg(key, kind string, keep bool) *sessionv1.NewMessage {
	m := &sessionv1.NewMessage{MessageId: ids.New(), Role: sessionv1.Role_ROLE_TOOL, Content: "item " + key, ItemKey: key, Kind: kind}
	if keep {
		m.OnKeyConflict = sessionv1.KeyConflict_KEY_CONFLICT_KEEP_STORED
	}
	return m
}

// TestKeyedAppends: through a warm owner and a cold one (its first append
// blind, folded into its activation), a key held by a stored message fails
// the append or, with KEEP_STORED, answers the stored message (kept) and
// consumes no sequence; a retry with the same ids is a duplicate; bad
// keys are INVALID_ARGUMENT and store nothing.
func TestKeyedAppends(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "keyed")
	first := keyedMsg("w:1", "write", false)
	if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{first}}); err != nil {
		t.Fatalf("first append: %v", err)
	}
	req := &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{keyedMsg("w:0", "write", true), keyedMsg("w:1", "write", true)}}
	r, err := n.svc.Append(ctx, req)
	if err != nil || r.GetDuplicate() || r.GetNextSequence() != 2 {
		t.Fatalf("keep-stored append: %v %v, want next sequence 2", r, err)
	}
	if m := r.GetMessages(); m[0].GetKept() || m[0].GetSequence() != 1 || !m[1].GetKept() || m[1].GetMessageId() != first.MessageId || m[1].GetSequence() != 0 {
		t.Fatalf("keep-stored answer: %v", m)
	}
	r, err = n.svc.Append(ctx, req)
	if err != nil || !r.GetDuplicate() || !r.GetMessages()[1].GetKept() || r.GetMessages()[0].GetSequence() != 1 {
		t.Fatalf("retry: %v %v, want a duplicate", r, err)
	}
	_, err = n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{keyedMsg("w:1", "", false)}})
	wantCode(t, err, errs.AlreadyExistsCode)
	for _, bad := range [][]*sessionv1.NewMessage{
		{keyedMsg("k", "", false), keyedMsg("k", "", true)},
		{keyedMsg(strings.Repeat("k", 257), "", false)},
		{keyedMsg("k", "é", false)},
		{keyedMsg("", "", true)},
	} {
		_, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: bad})
		wantCode(t, err, errs.InvalidArgumentCode)
	}

	// A cold owner's first append is blind: the store resolves its keys.
	b := startSecond(t, n, n.store.Reader())
	r, err = b.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{keyedMsg("w:0", "write", true), keyedMsg("w:2", "write", true)}})
	if err != nil || !r.GetMessages()[0].GetKept() || r.GetMessages()[0].GetSequence() != 1 || r.GetMessages()[1].GetSequence() != 2 || r.GetNextSequence() != 3 {
		t.Fatalf("blind keep-stored append: %v %v", r, err)
	}
	r, err = b.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("after")}})
	if err != nil || r.GetMessages()[0].GetSequence() != 3 {
		t.Fatalf("append after the blind one: %v %v", r, err)
	}
	ms := n.messages(t, id)
	checkDense(t, ms)
	if len(ms) != 4 || ms[2].GetItemKey() != "w:2" || ms[2].GetKind() != "write" {
		t.Fatalf("stored: %v", ms)
	}
}

// TestItemReads: GetItem by key, and ListItems paged by its cursor, newest
// first, until the cursor is unset.
func TestItemReads(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "items")
	var msgs []*sessionv1.NewMessage
	for i := range 5 {
		msgs = append(msgs, keyedMsg("cp:"+string(rune('a'+i)), "checkpoint", false), userMsg("between"))
	}
	if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: msgs}); err != nil {
		t.Fatalf("append: %v", err)
	}
	g, err := n.svc.GetItem(ctx, &sessionv1.GetItemRequest{SessionId: id, ItemKey: "cp:c"})
	if err != nil || g.GetMessage().GetSequence() != 4 || g.GetMessage().GetKind() != "checkpoint" {
		t.Fatalf("GetItem: %v %v", g, err)
	}
	_, err = n.svc.GetItem(ctx, &sessionv1.GetItemRequest{SessionId: id, ItemKey: "cp:z"})
	wantCode(t, err, errs.NotFoundCode)
	_, err = n.svc.GetItem(ctx, &sessionv1.GetItemRequest{SessionId: id})
	wantCode(t, err, errs.InvalidArgumentCode)
	var got []string
	req := &sessionv1.ListItemsRequest{SessionId: id, Kind: "checkpoint", NewestFirst: true, Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages: %v", got)
		}
		r, err := n.svc.ListItems(ctx, req)
		if err != nil {
			t.Fatalf("ListItems: %v", err)
		}
		for _, m := range r.GetMessages() {
			got = append(got, m.GetItemKey())
		}
		if r.NextCursorSequence == nil {
			break
		}
		req.CursorSequence = r.NextCursorSequence
	}
	if strings.Join(got, ",") != "cp:e,cp:d,cp:c,cp:b,cp:a" {
		t.Fatalf("pages: %v", got)
	}
	r, err := n.svc.ListItems(ctx, &sessionv1.ListItemsRequest{SessionId: id, KeyPrefix: "cp:", CursorSequence: ptr(int64(3))})
	if err != nil || len(r.GetMessages()) != 3 || r.GetMessages()[0].GetItemKey() != "cp:c" || r.NextCursorSequence != nil {
		t.Fatalf("prefix page from 3: %v %v", r, err)
	}
	_, err = n.svc.ListItems(ctx, &sessionv1.ListItemsRequest{SessionId: ids.New()})
	wantCode(t, err, errs.NotFoundCode)
	_, err = n.svc.ListItems(ctx, &sessionv1.ListItemsRequest{SessionId: id, Kind: "bad\x01"})
	wantCode(t, err, errs.InvalidArgumentCode)
}

func ptr[T any](v T) *T { return &v }

// TestKeyedExportImport: an export carries item keys and kinds and an
// import restores them; an import that gives one key twice is refused.
func TestKeyedExportImport(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id := n.create(t, "export")
	if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{
		keyedMsg("a", "checkpoint", false), userMsg("plain"), keyedMsg("b", "write", false)}}); err != nil {
		t.Fatal(err)
	}
	ex, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil || !strings.Contains(ex.GetData(), `"item_key":"b","kind":"write"`) {
		t.Fatalf("export: %v %v", ex.GetData(), err)
	}
	im, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: ex.GetData()})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	g, err := n.svc.GetItem(ctx, &sessionv1.GetItemRequest{SessionId: im.GetSession().GetSessionId(), ItemKey: "b"})
	if err != nil || g.GetMessage().GetSequence() != 2 || g.GetMessage().GetKind() != "write" {
		t.Fatalf("imported item: %v %v", g, err)
	}
	// The same key twice, with the checksum of the changed content (which
	// the refusal of the stated one names).
	data := strings.Replace(ex.GetData(), `"item_key":"b"`, `"item_key":"a"`, 1)
	_, err = n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: data})
	msg := errs.From(err).Msg
	at := strings.LastIndex(msg, "sha256:")
	if at < 0 {
		t.Fatalf("changed import: %v, want a checksum refusal naming the content's", err)
	}
	data = strings.Replace(data, ex.GetChecksum(), strings.TrimSuffix(msg[at:], ")"), 1)
	_, err = n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: data})
	wantCode(t, err, errs.InvalidArgumentCode)
	if !strings.Contains(err.Error(), `item key "a"`) {
		t.Fatalf("import with a key twice: %v", err)
	}
}

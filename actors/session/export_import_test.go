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
	"github.com/agentstate/agentstate/messages/ids"
)

// exportFixture builds a session with everything an export carries.
func exportFixture(t *testing.T, n *node) (id string, plans []string) {
	ctx := ctxT(t)
	r, err := n.svc.Create(ctx, &sessionv1.CreateSessionRequest{
		ActorName: "coder", Namespace: "team", Automation: "auto", MetadataJson: `{"html":"<a&b>","ü":[1,2.5,null]}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	id = r.GetSession().GetSessionId()
	turns := [][]*sessionv1.NewMessage{
		{{Role: sessionv1.Role_ROLE_SYSTEM, Content: "be brief"}},
		{userMsg("héllo <world> & \"you\"\n"), {Role: sessionv1.Role_ROLE_ASSISTANT, Content: "hi", MetadataJson: `{"tokens": 3}`}},
		{{Role: sessionv1.Role_ROLE_TOOL, Content: "", MetadataJson: `{"tool":"ls","args":{"path":"/"}}`}},
	}
	for _, turn := range turns {
		if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: turn}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.svc.UpdateTokenUsage(ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: id, InputTokens: 10, OutputTokens: 20, Cost: 0.1 + 0.2}); err != nil {
		t.Fatal(err)
	}
	plans = []string{ids.New(), ids.New()}
	for i, p := range plans {
		if _, err := n.svc.LinkPlan(ctx, &sessionv1.LinkPlanRequest{SessionId: id, Plan: &sessionv1.LinkedPlan{PlanId: p, Phase: []string{"plan", "execute"}[i], State: "running"}}); err != nil {
			t.Fatal(err)
		}
	}
	return id, plans
}

func TestExportImportRoundTrip(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id, plans := exportFixture(t, n)

	ex, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ex.GetChecksum(), "sha256:") || len(ex.GetChecksum()) != len("sha256:")+64 {
		t.Fatalf("checksum %q", ex.GetChecksum())
	}
	// The checksum covers the data without its checksum field, which is
	// the last field: recompute it independently.
	suffix := `,"checksum":"` + ex.GetChecksum() + `"}`
	if !strings.HasSuffix(ex.GetData(), suffix) {
		t.Fatalf("data does not end with its checksum: %s", ex.GetData())
	}
	canon := strings.TrimSuffix(ex.GetData(), suffix) + "}"
	sum := sha256.Sum256([]byte(canon))
	if "sha256:"+hex.EncodeToString(sum[:]) != ex.GetChecksum() {
		t.Fatal("checksum is not the SHA-256 of the canonical form")
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(ex.GetData()), &doc); err != nil || doc["schema_version"] != session.SchemaVersion {
		t.Fatalf("data: %v %v", doc["schema_version"], err)
	}

	im, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: ex.GetData()})
	if err != nil {
		t.Fatal(err)
	}
	nid := im.GetSession().GetSessionId()
	if nid == id || ids.Check("session_id", nid) != nil || im.GetMessagesImported() != 4 {
		t.Fatalf("import answered %v", im)
	}
	orig, copy := n.get(t, id), n.get(t, nid)
	if copy.GetActorName() != orig.GetActorName() || copy.GetNamespace() != orig.GetNamespace() ||
		copy.GetAutomation() != orig.GetAutomation() || copy.GetMetadataJson() != orig.GetMetadataJson() ||
		copy.GetMessageCount() != 4 || copy.GetState() != sessionv1.SessionState_SESSION_STATE_ACTIVE {
		t.Fatalf("imported session\n got %v\nfrom %v", copy, orig)
	}
	if ct, ot := copy.GetTokenUsage(), orig.GetTokenUsage(); ct.GetInputTokens() != 10 || ct.GetOutputTokens() != 20 || ct.GetCost() != ot.GetCost() {
		t.Fatalf("token usage %v, want %v", ct, ot)
	}
	if lp := copy.GetLinkedPlans(); len(lp) != 2 || lp[0].GetPlanId() != plans[0] || lp[1].GetPlanId() != plans[1] || lp[1].GetPhase() != "execute" {
		t.Fatalf("links %v", lp)
	}
	om, cm := n.messages(t, id), n.messages(t, nid)
	checkDense(t, cm)
	if len(om) != len(cm) {
		t.Fatalf("%d messages imported, want %d", len(cm), len(om))
	}
	for i := range om {
		o, c := om[i], cm[i]
		if o.GetMessageId() != c.GetMessageId() || o.GetRole() != c.GetRole() || o.GetContent() != c.GetContent() ||
			o.GetMetadataJson() != c.GetMetadataJson() || !o.GetCreatedAt().AsTime().Equal(c.GetCreatedAt().AsTime()) {
			t.Fatalf("message %d\n got %v\nwant %v", i, c, o)
		}
	}

	// The new session is a live one.
	a, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: nid, Messages: []*sessionv1.NewMessage{userMsg("next")}})
	if err != nil || a.GetMessages()[0].GetSequence() != 4 {
		t.Fatalf("append to the import: %v %v", a, err)
	}

	// Exporting the import reproduces the messages and links exactly.
	ex2, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil || ex2.GetData() != ex.GetData() {
		t.Fatalf("a second export of an unchanged session differs (%v)", err)
	}
}

func TestImportChecksFormatAndChecksum(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{}, nil)
	ctx := ctxT(t)
	id, _ := exportFixture(t, n)
	ex, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	data, sum := ex.GetData(), ex.GetChecksum()
	hexsum := strings.TrimPrefix(sum, "sha256:")

	// Bare hex (also upper case) is accepted.
	for _, alt := range []string{hexsum, strings.ToUpper(hexsum)} {
		if _, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: strings.Replace(data, sum, alt, 1)}); err != nil {
			t.Fatalf("import with checksum %q: %v", alt[:8], err)
		}
	}
	// Whitespace is not content: a pretty-printed export verifies.
	var pretty strings.Builder
	var v json.RawMessage = json.RawMessage(data)
	b, _ := json.MarshalIndent(v, "", "  ")
	pretty.Write(b)
	if _, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: pretty.String()}); err != nil {
		t.Fatalf("pretty-printed import: %v", err)
	}

	before, err := n.svc.List(ctx, &sessionv1.ListSessionsRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"content tampered":  strings.Replace(data, "be brief", "be long", 1),
		"sequence tampered": strings.Replace(data, `"sequence":1`, `"sequence":7`, 1),
		"checksum wrong":    strings.Replace(data, hexsum, strings.Repeat("0", 64), 1),
		"checksum missing":  strings.Replace(data, `,"checksum":"`+sum+`"`, "", 1),
		"checksum not hex":  strings.Replace(data, hexsum, strings.Repeat("z", 64), 1),
		"schema version":    strings.Replace(data, session.SchemaVersion, "agentstate.session/0", 1),
		"unknown field":     strings.Replace(data, `"messages":`, `"extra":1,"messages":`, 1),
		"trailing data":     data + "{}",
		"not JSON":          "nope",
		"empty":             "",
	}
	for name, d := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: d})
			wantCode(t, err, errs.InvalidArgumentCode)
		})
	}
	after, err := n.svc.List(ctx, &sessionv1.ListSessionsRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.GetSessions()) != len(before.GetSessions()) {
		t.Fatalf("refused imports created %d sessions", len(after.GetSessions())-len(before.GetSessions()))
	}
}

// A document with a valid checksum is still validated like live calls.
func TestImportValidatesContent(t *testing.T) {
	n := startNode(t, memURL(t), session.Config{MaxContentBytes: 16}, nil)
	ctx := ctxT(t)
	id := n.create(t, "a")
	if _, err := n.svc.Append(ctx, &sessionv1.AppendRequest{SessionId: id, Messages: []*sessionv1.NewMessage{userMsg("short")}}); err != nil {
		t.Fatal(err)
	}
	ex, err := n.svc.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	// reseal edits the canonical form (the data without its trailing
	// checksum field) and seals it again with a correct checksum, as any
	// client could: what is refused is the content, not the checksum.
	suffix := `,"checksum":"` + ex.GetChecksum() + `"}`
	canon := strings.TrimSuffix(ex.GetData(), suffix) + "}"
	reseal := func(old, new string) string {
		if !strings.Contains(canon, old) {
			t.Fatalf("export lacks %s", old)
		}
		c := strings.Replace(canon, old, new, 1)
		sum := sha256.Sum256([]byte(c))
		return strings.TrimSuffix(c, "}") + `,"checksum":"` + hex.EncodeToString(sum[:]) + `"}`
	}
	if _, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: reseal(`"short"`, `"other"`)}); err != nil {
		t.Fatalf("a resealed valid edit is refused: %v", err)
	}
	for name, edit := range map[string][2]string{
		"role":     {`"role":"user"`, `"role":"robot"`},
		"content":  {`"short"`, `"` + strings.Repeat("x", 17) + `"`},
		"id":       {`"message_id":"`, `"message_id":"m `},
		"metadata": {`"metadata_json":"{}","created_at"`, `"metadata_json":"[]","created_at"`},
		"count":    {`"message_count":1`, `"message_count":2`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := n.svc.Import(ctx, &sessionv1.ImportSessionRequest{Data: reseal(edit[0], edit[1])})
			wantCode(t, err, errs.InvalidArgumentCode)
			if !strings.Contains(err.Error(), "messages[0]") && name != "count" {
				t.Fatalf("refused for another reason: %v", err)
			}
		})
	}
}

package e2e_test

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A session of 60,000 messages of 200 bytes (12 MB) does not fit one
// reply: the unary Export says so (RESOURCE_EXHAUSTED, naming the stream),
// and ExportStream/ImportStream carry it through a default Go client, in
// many chunks, with the same checksum both ways; the CLI does the same
// through its file.
func TestExportImportStreamsOverGRPC(t *testing.T) {
	n := startNode(t)
	sessions := sessionv1.NewSessionServiceClient(n.conn())
	ctx := ctxT(t)
	cr, err := sessions.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "big"})
	if err != nil {
		t.Fatal(err)
	}
	sid := cr.GetSession().GetSessionId()
	const count = 60000
	body := strings.Repeat("m", 190)
	for done := 0; done < count; {
		req := &sessionv1.AppendRequest{SessionId: sid}
		for ; done < count && len(req.Messages) < 1000; done++ {
			req.Messages = append(req.Messages, &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_USER, Content: fmt.Sprintf("%09d%s", done, body)})
		}
		if _, err := sessions.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}

	_, err = sessions.Export(ctx, &sessionv1.ExportSessionRequest{SessionId: sid})
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "ExportStream") {
		t.Fatalf("unary Export of a large session: %v; want RESOURCE_EXHAUSTED pointing to ExportStream", err)
	}

	ex, err := sessions.ExportStream(ctx, &sessionv1.ExportSessionRequest{SessionId: sid})
	if err != nil {
		t.Fatal(err)
	}
	im, err := sessions.ImportStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chunks, messages, sum := 0, 0, ""
	for {
		c, err := ex.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ExportStream: %v", err)
		}
		chunks++
		messages += len(c.GetPage().GetMessages())
		if tr := c.GetTrailer(); tr != nil {
			sum = tr.GetChecksum()
		}
		ic := &sessionv1.ImportChunk{}
		switch p := c.GetPart().(type) {
		case *sessionv1.ExportChunk_Header:
			ic.Part = &sessionv1.ImportChunk_Header{Header: p.Header}
		case *sessionv1.ExportChunk_Page:
			ic.Part = &sessionv1.ImportChunk_Page{Page: p.Page}
		case *sessionv1.ExportChunk_Trailer:
			ic.Part = &sessionv1.ImportChunk_Trailer{Trailer: p.Trailer}
		}
		if err := im.Send(ic); err != nil {
			t.Fatalf("ImportStream: %v", err)
		}
	}
	resp, err := im.CloseAndRecv()
	if err != nil {
		t.Fatalf("ImportStream: %v", err)
	}
	if messages != count || chunks < count/1000+2 || resp.GetMessagesImported() != count || resp.GetChecksum() != sum || sum == "" {
		t.Fatalf("exported %d messages in %d chunks (checksum %s); imported %d (checksum %s)",
			messages, chunks, sum, resp.GetMessagesImported(), resp.GetChecksum())
	}
	got, err := sessions.Get(ctx, &sessionv1.GetSessionRequest{SessionId: resp.GetSession().GetSessionId()})
	if err != nil || got.GetSession().GetMessageCount() != count {
		t.Fatalf("imported session: %v, %v", got, err)
	}

	file := filepath.Join(t.TempDir(), "big.jsonl")
	var out sessionv1.ExportSessionResponse
	n.cli(nil, "session", "export", "--session", sid, "--out", file).ok(t, &out)
	var in sessionv1.ImportSessionResponse
	n.cli(nil, "session", "import", "--file", file).ok(t, &in)
	if out.GetChecksum() != sum || in.GetChecksum() != sum || in.GetMessagesImported() != count {
		t.Fatalf("CLI: exported checksum %s, imported %d messages with checksum %s; want %s", out.GetChecksum(), in.GetMessagesImported(), in.GetChecksum(), sum)
	}
}

// The largest message a node accepts (1 MiB of content and 1 MiB of
// metadata) pages alone, and a default client receives its page and its
// export.
func TestLargestMessagesPageThroughADefaultClient(t *testing.T) {
	n := startNode(t)
	sessions := sessionv1.NewSessionServiceClient(n.conn())
	ctx := ctxT(t)
	cr, err := sessions.Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "large"})
	if err != nil {
		t.Fatal(err)
	}
	sid := cr.GetSession().GetSessionId()
	meta := `{"k":"` + strings.Repeat("y", 1<<20-8) + `"}`
	for i := 0; i < 3; i++ {
		_, err := sessions.Append(ctx, &sessionv1.AppendRequest{SessionId: sid, Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_TOOL, Content: strings.Repeat(string(rune('a'+i)), 1<<20), MetadataJson: meta}}})
		if err != nil {
			t.Fatalf("append of the largest message: %v", err)
		}
	}
	for from := int64(0); from < 3; from++ {
		page, err := sessions.ListMessages(ctx, &sessionv1.ListMessagesRequest{SessionId: sid, FromSequence: from, Limit: 1000})
		if err != nil || len(page.GetMessages()) != 1 || page.GetNextSequence() != from+1 {
			t.Fatalf("page from %d: %d messages, %v", from, len(page.GetMessages()), err)
		}
	}
	ex, err := sessions.ExportStream(ctx, &sessionv1.ExportSessionRequest{SessionId: sid})
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	for {
		c, err := ex.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ExportStream: %v", err)
		}
		if c.GetPage() != nil {
			pages++
		}
	}
	if pages != 3 {
		t.Fatalf("%d pages; want one per message", pages)
	}
}

package session

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fuzzExport is a small genuine export: its session and messages.
func fuzzExport() (*sessionv1.Session, []*sessionv1.Message) {
	at := timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC))
	s := &sessionv1.Session{SessionId: ids.New(), ActorName: "planner", Namespace: "local", MetadataJson: `{"a":[1,{"b":null}]}`,
		State: sessionv1.SessionState_SESSION_STATE_CLOSED, TokenUsage: &sessionv1.TokenUsage{InputTokens: 3, Cost: 0.5},
		CreatedAt: at, UpdatedAt: at, ClosedAt: at, MessageCount: 3, FirstSequence: 1,
		LinkedPlans: []*sessionv1.LinkedPlan{{PlanId: "p1", Phase: "execute", State: "queued"}}}
	msgs := []*sessionv1.Message{
		{MessageId: ids.New(), Sequence: 1, Role: sessionv1.Role_ROLE_USER, Content: "hi", MetadataJson: "{}", CreatedAt: at},
		{MessageId: "client-2", Sequence: 2, Role: sessionv1.Role_ROLE_TOOL, Content: "ok \"quoted\"\n", MetadataJson: `{"t":[[]]}`, CreatedAt: at, EventTime: at},
	}
	return s, msgs
}

// FuzzDecodeStrict: the strict check answers nil or INVALID_ARGUMENT, never
// accepts JSON nesting past jsonobj.MaxDepth, and what it accepts
// encoding/json decodes to the very same value.
func FuzzDecodeStrict(f *testing.F) {
	s, msgs := fuzzExport()
	data, _, err := seal(newExportDoc(s, msgs))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(data))
	f.Add([]byte(`{"session":{"state":"active","snapshot":{"data":"AAE="}},"messages":[{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tooDeep := jsonobj.CheckDepth("", data, jsonobj.MaxDepth) != nil
		var d exportDoc
		err := decodeStrict(data, &d)
		mustBeInvalidArgument(t, err)
		if err == nil {
			if tooDeep {
				t.Fatal("accepted JSON nesting past the limit")
			}
			var plain exportDoc
			if err := json.Unmarshal(data, &plain); err != nil || !reflect.DeepEqual(d, plain) {
				t.Fatalf("strictly %+v; encoding/json %+v, %v", d, plain, err)
			}
		}
		var v any
		err = decodeStrict(data, &v)
		mustBeInvalidArgument(t, err)
		if err == nil && (tooDeep || !json.Valid(data)) {
			t.Fatalf("accepted %q as a JSON value", data)
		}
	})
}

// FuzzExportFileReader: whatever a file holds, the reader answers
// INVALID_ARGUMENT or a header, pages of consecutive messages as many as
// the header says, and a trailer; what it reads, written as a file again,
// reads back the same.
func FuzzExportFileReader(f *testing.F) {
	s, msgs := fuzzExport()
	var file bytes.Buffer
	w := NewExportFileWriter(&file)
	for _, c := range []*sessionv1.ExportChunk{
		{Part: &sessionv1.ExportChunk_Header{Header: &sessionv1.ExportHeader{SchemaVersion: SchemaVersion, Session: s, StateJson: `{"k":[1]}`,
			Snapshot: &sessionv1.Snapshot{Sequence: 1, Data: []byte{0, 255}, CreatedAt: s.CreatedAt}}}},
		{Part: &sessionv1.ExportChunk_Page{Page: &sessionv1.ExportPage{Messages: msgs}}},
		{Part: &sessionv1.ExportChunk_Trailer{Trailer: &sessionv1.ExportTrailer{Checksum: "sha256:00"}}},
	} {
		if err := w.WriteChunk(c); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(file.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		read := func(data []byte) []*sessionv1.ImportChunk {
			fr := NewExportFileReader(bytes.NewReader(data))
			fr.maxLine = 4096
			chunks, err := drain(fr)
			mustBeInvalidArgument(t, err)
			if err != nil {
				return nil
			}
			return chunks
		}
		chunks := read(data)
		if chunks == nil {
			return
		}
		last := len(chunks) - 1
		h := chunks[0].GetHeader()
		if h == nil || last < 1 || chunks[last].GetTrailer() == nil {
			t.Fatalf("read %d chunks, not a header ... a trailer", len(chunks))
		}
		next := h.GetSession().GetFirstSequence()
		var again bytes.Buffer
		w := NewExportFileWriter(&again)
		for i, c := range chunks {
			var ec *sessionv1.ExportChunk
			switch p := c.GetPart().(type) {
			case *sessionv1.ImportChunk_Header:
				if i != 0 {
					t.Fatalf("chunk %d is a second header", i)
				}
				ec = &sessionv1.ExportChunk{Part: &sessionv1.ExportChunk_Header{Header: p.Header}}
			case *sessionv1.ImportChunk_Page:
				for _, m := range p.Page.GetMessages() {
					if m.GetSequence() != next {
						t.Fatalf("message sequence %d; want %d", m.GetSequence(), next)
					}
					next++
				}
				ec = &sessionv1.ExportChunk{Part: &sessionv1.ExportChunk_Page{Page: p.Page}}
			case *sessionv1.ImportChunk_Trailer:
				ec = &sessionv1.ExportChunk{Part: &sessionv1.ExportChunk_Trailer{Trailer: p.Trailer}}
			}
			if err := w.WriteChunk(ec); err != nil {
				t.Fatal(err)
			}
		}
		if next != h.GetSession().GetMessageCount() {
			t.Fatalf("read messages up to %d; the header says %d", next, h.GetSession().GetMessageCount())
		}
		back := read(again.Bytes())
		if len(back) != len(chunks) {
			t.Fatalf("written again, %d chunks read back; want %d", len(back), len(chunks))
		}
		for i := range back {
			if !proto.Equal(back[i], chunks[i]) {
				t.Fatalf("chunk %d reads back as %v; want %v", i, back[i], chunks[i])
			}
		}
	})
}

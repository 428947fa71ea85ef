package storetest

import (
	"fmt"
	"strings"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

var readerCases = []testCase{
	{"limits are clamped to 1..1000, 0 means 100", func(h *harness) {
		s := h.create(h.msgs(1005)...)
		entries := make([]*auditv1.AuditEntry, 1005)
		for i := range entries {
			entries[i] = h.entry("bulk")
		}
		h.ok(&persistence.RecordAudit{Entries: entries})
		for _, c := range []struct{ limit, want int }{{0, 100}, {-5, 1}, {1, 1}, {999, 999}, {1000, 1000}, {5000, 1000}} {
			ms, err := h.r.ListMessages(h.ctx, s.SessionId, 0, c.limit)
			if err != nil || len(ms) != c.want {
				h.Fatalf("ListMessages limit %d: %d messages, %v; want %d", c.limit, len(ms), err, c.want)
			}
			es, err := h.r.ListAudit(h.ctx, nil, "", c.limit)
			if err != nil || len(es) != c.want {
				h.Fatalf("ListAudit limit %d: %d entries, %v; want %d", c.limit, len(es), err, c.want)
			}
			es, err = h.r.ScanAudit(h.ctx, 0, c.limit)
			if err != nil || len(es) != c.want {
				h.Fatalf("ScanAudit limit %d: %d entries, %v; want %d", c.limit, len(es), err, c.want)
			}
		}
		if n, err := h.r.CountAudit(h.ctx, nil); err != nil || n != 1005 {
			h.Fatalf("CountAudit: %d, %v", n, err)
		}
	}},
	{"list messages from a sequence", func(h *harness) {
		s := h.create(h.msgs(10)...)
		ms, err := h.r.ListMessages(h.ctx, s.SessionId, 7, 2)
		if err != nil || len(ms) != 2 || ms[0].Sequence != 7 || ms[1].Sequence != 8 {
			h.Fatalf("ListMessages(from 7, limit 2): %v, %v", ms, err)
		}
		if ms, err := h.r.ListMessages(h.ctx, s.SessionId, 10, 0); err != nil || len(ms) != 0 {
			h.Fatalf("ListMessages past the end: %v, %v", ms, err)
		}
		if ms, err := h.r.ListMessages(h.ctx, ids.New(), 0, 0); err != nil || len(ms) != 0 {
			h.Fatalf("ListMessages of an unknown session: %v, %v", ms, err)
		}
	}},
	{"message pages are capped by bytes, with at least one message", func(h *harness) {
		// Sizes around the cap: 300 KiB messages fill a page with three
		// (four would pass MaxPageBytes); a message above the cap comes
		// alone; metadata counts too.
		big := strings.Repeat("x", 300<<10)
		huge := strings.Repeat("y", persistence.MaxPageBytes+1)
		var msgs []*sessionv1.Message
		for i := 0; i < 7; i++ {
			msgs = append(msgs, h.msg(big))
		}
		msgs = append(msgs, h.msg(huge), h.msg("small"))
		meta := h.msg("m")
		meta.MetadataJson = `{"k":"` + strings.Repeat("z", 800<<10) + `"}`
		msgs = append(msgs, meta, h.msg(big))
		s := h.create(msgs...)
		var got [][]int64
		for from := int64(0); from < int64(len(msgs)); {
			ms, err := h.r.ListMessages(h.ctx, s.SessionId, from, 1000)
			if err != nil || len(ms) == 0 {
				h.Fatalf("ListMessages(from %d): %d messages, %v", from, len(ms), err)
			}
			var page []int64
			bytes := 0
			for i, m := range ms {
				if m.Sequence != from+int64(i) || m.Content != msgs[m.Sequence].Content || m.MetadataJson != msgs[m.Sequence].MetadataJson {
					h.Fatalf("ListMessages(from %d)[%d]: sequence %d or its content is not the stored one", from, i, m.Sequence)
				}
				bytes += persistence.MessagePageBytes(len(m.Content), len(m.MetadataJson))
				page = append(page, m.Sequence)
			}
			if len(ms) > 1 && bytes > persistence.MaxPageBytes {
				h.Fatalf("ListMessages(from %d): %d messages of %d bytes, above MaxPageBytes", from, len(ms), bytes)
			}
			got = append(got, page)
			from += int64(len(ms))
		}
		want := "[[0 1 2] [3 4 5] [6] [7] [8 9] [10]]"
		if fmt.Sprint(got) != want {
			h.Fatalf("pages %v; want %s", got, want)
		}
	}},
	{"reader sees every committed write", func(h *harness) {
		s := h.create()
		for i := int64(0); i < 20; i++ {
			h.ok(&persistence.AppendMessages{SessionID: s.SessionId, NextSequence: i, Turns: []persistence.Turn{turn(h.msg("x"))}})
			if got := h.get(s.SessionId).MessageCount; got != i+1 {
				h.Fatalf("after commit %d the reader sees %d messages", i+1, got)
			}
		}
	}},
}

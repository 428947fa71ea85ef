package session

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The export file: JSON Lines, written and read one line at a time, so a
// file of any size costs one page of memory. Line 1 is the header,
//
//	{"format":"jsonl","schema_version":"agentstate.session/1","session":{...},"linked_plans":[...]}
//
// with the session as in the single-document export (exportSession), whose
// message_count says how many message lines follow; then one line per
// message (exportMessage), in sequence order; then the trailer,
//
//	{"checksum":"sha256:..."}
//
// and nothing else. The checksum is the single document's: the canonical
// form of the same content (canonicalWriter). Every line is parsed strictly
// (decodeStrict). A file that does not start with fileFormatPrefix is a
// single-document export (ExportSessionResponse.data).

const fileFormatPrefix = `{"format":"jsonl",`

// maxFileLine bounds one line of an export file: the largest message with
// all of its content and metadata escaped, and some.
const maxFileLine = 64 << 20

type fileHeader struct {
	Format        string        `json:"format"`
	SchemaVersion string        `json:"schema_version"`
	Session       exportSession `json:"session"`
	LinkedPlans   []exportLink  `json:"linked_plans"`
}

type fileTrailer struct {
	Checksum string `json:"checksum"`
}

// IsExportFile reports whether r starts like an export file written by
// ExportFileWriter (as opposed to a single-document export). It only peeks.
func IsExportFile(r *bufio.Reader) bool {
	b, _ := r.Peek(len(fileFormatPrefix))
	return string(b) == fileFormatPrefix
}

// ExportFileWriter writes an export's chunks (ExportTo, ExportStream) as an
// export file.
type ExportFileWriter struct {
	w        *bufio.Writer
	checksum string
}

func NewExportFileWriter(w io.Writer) *ExportFileWriter {
	return &ExportFileWriter{w: bufio.NewWriterSize(w, 256<<10)}
}

// WriteChunk writes one chunk; the trailer also flushes.
func (f *ExportFileWriter) WriteChunk(c *sessionv1.ExportChunk) error {
	switch p := c.GetPart().(type) {
	case *sessionv1.ExportChunk_Header:
		ds := withStateAndSnapshot(exportSessionOf(p.Header.GetSession()), orEmptyObject(p.Header.GetStateJson()), p.Header.GetSnapshot())
		if err := f.line(fileHeader{Format: "jsonl", SchemaVersion: p.Header.GetSchemaVersion(),
			Session: ds, LinkedPlans: exportLinksOf(p.Header.GetSession())}); err != nil {
			return err
		}
	case *sessionv1.ExportChunk_Page:
		for _, m := range p.Page.GetMessages() {
			if err := f.line(exportMessageOf(m)); err != nil {
				return err
			}
		}
	case *sessionv1.ExportChunk_Trailer:
		f.checksum = p.Trailer.GetChecksum()
		if err := f.line(fileTrailer{Checksum: f.checksum}); err != nil {
			return err
		}
		return f.w.Flush()
	default:
		return errs.InvalidArgument("an export chunk without a part")
	}
	return nil
}

// Checksum is the trailer's checksum, once written.
func (f *ExportFileWriter) Checksum() string { return f.checksum }

func (f *ExportFileWriter) line(v any) error {
	b, err := encode(v)
	if err != nil {
		return err
	}
	if _, err := f.w.Write(b); err != nil {
		return err
	}
	return f.w.WriteByte('\n')
}

// ExportFileReader reads an export file as import chunks (ImportFrom,
// ImportStream): the header, pages of at most 1000 messages and about
// persistence.MaxPageBytes, the trailer, then io.EOF. A malformed file is
// INVALID_ARGUMENT naming the line.
type ExportFileReader struct {
	r         *bufio.Reader
	maxLine   int // maxFileLine; tests lower it
	line      int
	remaining int64
	next      int64
	done      bool
	trailer   bool
}

func NewExportFileReader(r io.Reader) *ExportFileReader {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 256<<10)
	}
	return &ExportFileReader{r: br, maxLine: maxFileLine}
}

func (f *ExportFileReader) Next() (*sessionv1.ImportChunk, error) {
	switch {
	case f.done:
		return nil, io.EOF
	case f.line == 0:
		return f.header()
	case f.remaining == 0 && !f.trailer:
		return f.readTrailer()
	case f.remaining == 0:
		if _, err := f.readLine(); err != io.EOF {
			if err == nil {
				err = f.errorf("content after the trailer")
			}
			return nil, err
		}
		f.done = true
		return nil, io.EOF
	}
	page := &sessionv1.ExportPage{}
	bytes := 0
	for f.remaining > 0 && len(page.Messages) < maxPageSize && bytes < persistence.MaxPageBytes {
		b, err := f.readLine()
		if err != nil {
			return nil, f.eof(err, "a message")
		}
		var em exportMessage
		if err := decodeStrict(b, &em); err != nil {
			return nil, f.errorf("%s", errs.From(err).Msg)
		}
		m, err := f.message(em)
		if err != nil {
			return nil, err
		}
		page.Messages = append(page.Messages, m)
		bytes += persistence.MessagePageBytes(len(m.Content), len(m.MetadataJson))
		f.remaining--
	}
	return &sessionv1.ImportChunk{Part: &sessionv1.ImportChunk_Page{Page: page}}, nil
}

func (f *ExportFileReader) header() (*sessionv1.ImportChunk, error) {
	b, err := f.readLine()
	if err != nil {
		return nil, f.eof(err, "the header")
	}
	var h fileHeader
	if err := decodeStrict(b, &h); err != nil {
		return nil, f.errorf("%s", errs.From(err).Msg)
	}
	if h.Format != "jsonl" {
		return nil, f.errorf("format %q; want \"jsonl\"", clip(h.Format))
	}
	s, err := f.session(h.Session, h.LinkedPlans)
	if err != nil {
		return nil, err
	}
	f.remaining, f.next = h.Session.MessageCount, h.Session.FirstSequence
	state, snap, err := stateAndSnapshotOf(h.Session)
	if err != nil {
		return nil, f.errorf("%s", errs.From(err).Msg)
	}
	return &sessionv1.ImportChunk{Part: &sessionv1.ImportChunk_Header{Header: &sessionv1.ExportHeader{
		SchemaVersion: h.SchemaVersion, Session: s, StateJson: orEmptyObject(state), Snapshot: snap,
	}}}, nil
}

func (f *ExportFileReader) readTrailer() (*sessionv1.ImportChunk, error) {
	b, err := f.readLine()
	if err != nil {
		return nil, f.eof(err, "the trailer")
	}
	var t fileTrailer
	if err := decodeStrict(b, &t); err != nil {
		return nil, f.errorf("want the trailer after %d messages: %s", f.next, errs.From(err).Msg)
	}
	f.trailer = true
	return &sessionv1.ImportChunk{Part: &sessionv1.ImportChunk_Trailer{Trailer: &sessionv1.ExportTrailer{Checksum: t.Checksum}}}, nil
}

// session and message turn the file's text back into the protobuf values
// the export was made of. Each text must be exactly what the export writes
// for its value (a role name, a time as formatTime writes it), so that the
// checksum, computed over the text the values give, is the file's. A
// metadata or state left out or empty reads as {}, what the export writes
// for none, so that a file read and written again reads back the same.
func (f *ExportFileReader) session(es exportSession, links []exportLink) (*sessionv1.Session, error) {
	state, ok := lookup(stateNames, es.State)
	if !ok {
		return nil, f.errorf("session.state %q is not active or closed", clip(es.State))
	}
	s := &sessionv1.Session{
		SessionId: es.SessionID, ActorName: es.ActorName, Namespace: es.Namespace, Automation: es.Automation,
		MetadataJson: orEmptyObject(es.MetadataJSON), State: state, MessageCount: es.FirstSequence + es.MessageCount,
		ClientKey: es.ClientKey, FirstSequence: es.FirstSequence,
		TokenUsage: &sessionv1.TokenUsage{InputTokens: es.TokenUsage.InputTokens, OutputTokens: es.TokenUsage.OutputTokens, Cost: es.TokenUsage.Cost},
	}
	var err error
	if s.CreatedAt, err = f.time("session.created_at", es.CreatedAt); err != nil {
		return nil, err
	}
	if s.UpdatedAt, err = f.time("session.updated_at", es.UpdatedAt); err != nil {
		return nil, err
	}
	if es.ClosedAt != "" {
		if s.ClosedAt, err = f.time("session.closed_at", es.ClosedAt); err != nil {
			return nil, err
		}
	}
	if es.MessageCount < 0 || es.FirstSequence < 0 {
		return nil, f.errorf("session.message_count is %d, first_sequence %d", es.MessageCount, es.FirstSequence)
	}
	if es.ExpiresAt != "" {
		if s.ExpiresAt, err = f.time("session.expires_at", es.ExpiresAt); err != nil {
			return nil, err
		}
	}
	for _, l := range links {
		s.LinkedPlans = append(s.LinkedPlans, &sessionv1.LinkedPlan{PlanId: l.PlanID, Phase: l.Phase, State: l.State})
	}
	return s, nil
}

func (f *ExportFileReader) message(em exportMessage) (*sessionv1.Message, error) {
	role, ok := lookup(roleNames, em.Role)
	if !ok {
		return nil, f.errorf("role %q is not user, assistant, system or tool", clip(em.Role))
	}
	if em.Sequence != f.next {
		return nil, f.errorf("sequence %d; want %d", em.Sequence, f.next)
	}
	created, err := f.time("created_at", em.CreatedAt)
	if err != nil {
		return nil, err
	}
	var event *timestamppb.Timestamp
	if em.EventTime != "" {
		if event, err = f.time("event_time", em.EventTime); err != nil {
			return nil, err
		}
	}
	f.next++
	return &sessionv1.Message{MessageId: em.MessageID, Sequence: em.Sequence, Role: role, Content: em.Content,
		MetadataJson: orEmptyObject(em.MetadataJSON), CreatedAt: created, EventTime: event, ItemKey: em.ItemKey, Kind: em.Kind}, nil
}

func (f *ExportFileReader) time(field, text string) (*timestamppb.Timestamp, error) {
	ts, err := parseTime(field, text)
	if err != nil {
		return nil, f.errorf("%s", errs.From(err).Msg)
	}
	if formatTime(ts) != text {
		return nil, f.errorf("%s %q is not written as an export writes it (%s)", field, clip(text), formatTime(ts))
	}
	return ts, nil
}

// readLine returns the next line without its newline; io.EOF at the end
// of the file (a last line without a newline is a line).
func (f *ExportFileReader) readLine() ([]byte, error) {
	var line []byte
	for {
		b, err := f.r.ReadSlice('\n')
		if len(line)+len(b) > f.maxLine {
			f.line++ // the line too long is the next one
			return nil, f.errorf("line is longer than %d bytes", f.maxLine)
		}
		line = append(line, b...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(line) > 0:
			f.line++
			return line, nil
		case err != nil:
			return nil, err
		}
		f.line++
		return bytes.TrimSuffix(line, []byte("\n")), nil
	}
}

func (f *ExportFileReader) eof(err error, want string) error {
	if err == io.EOF {
		return errs.InvalidArgument("export file: ends after line %d, before %s", f.line, want)
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("export file: %w", err)
}

func (f *ExportFileReader) errorf(format string, args ...any) error {
	return errs.InvalidArgument("export file, line %d: %s", f.line, fmt.Sprintf(format, args...))
}

// ExportFile writes a session's export file to w (ExportTo, one page at a
// time) and returns its checksum.
func (s *Service) ExportFile(ctx context.Context, req *sessionv1.ExportSessionRequest, w io.Writer) (string, error) {
	fw := NewExportFileWriter(w)
	if err := s.ExportTo(ctx, req, fw.WriteChunk); err != nil {
		return "", err
	}
	return fw.Checksum(), nil
}

// ImportFile imports an export file read from r (ImportFrom, one page at a
// time).
func (s *Service) ImportFile(ctx context.Context, r io.Reader) (*sessionv1.ImportSessionResponse, error) {
	return s.ImportFrom(ctx, NewExportFileReader(r).Next)
}

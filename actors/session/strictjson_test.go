package session

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func nestedArray(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// The strict check takes JSON nesting up to jsonobj.MaxDepth and refuses
// one level more, naming the limit; its paths stay as precise as before.
func TestDecodeStrictDepth(t *testing.T) {
	var v any
	if err := decodeStrict([]byte(nestedArray(jsonobj.MaxDepth)), &v); err != nil {
		t.Fatalf("%d levels (the limit): %v", jsonobj.MaxDepth, err)
	}
	for _, depth := range []int{jsonobj.MaxDepth + 1, 200_000} {
		for _, data := range []string{nestedArray(depth), `{"messages":[{"content":` + nestedArray(depth) + `}]}`} {
			err := decodeStrict([]byte(data), &exportDoc{})
			if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), "limit of 128 levels") {
				t.Fatalf("%d levels: %v; want INVALID_ARGUMENT naming the limit", depth, err)
			}
		}
	}
	for data, want := range map[string]string{
		`{"session":{"bogus":1}}`:                    `at $.session: unknown field "bogus"`,
		`{"messages":[{},{"role":"a","role":"b"}]}`:  `at $.messages[1]: key "role" appears twice`,
		`{"session":{"snapshot":{"data":"","x":0}}}`: `at $.session.snapshot: unknown field "x"`,
		`{"messages":[{}`:                            `at $.messages: EOF`,
		`{"session":{"state":"active"]`:              `at $.session: invalid character ']'`,
	} {
		err := decodeStrict([]byte(data), &exportDoc{})
		if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("decodeStrict(%s) = %v; want %s", data, err, want)
		}
	}
}

// exportFileHeader is a valid first line of an export file of n messages.
func exportFileHeader(t testing.TB, n int64) string {
	var b strings.Builder
	now := timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	w := NewExportFileWriter(&b)
	err := w.WriteChunk(&sessionv1.ExportChunk{Part: &sessionv1.ExportChunk_Header{Header: &sessionv1.ExportHeader{
		SchemaVersion: SchemaVersion, Session: &sessionv1.Session{SessionId: ids.New(), Namespace: "ns", MetadataJson: "{}",
			State: sessionv1.SessionState_SESSION_STATE_ACTIVE, MessageCount: n, CreatedAt: now, UpdatedAt: now},
	}}})
	if err == nil { // the trailer flushes
		err = w.WriteChunk(&sessionv1.ExportChunk{Part: &sessionv1.ExportChunk_Trailer{Trailer: &sessionv1.ExportTrailer{}}})
	}
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(b.String(), "\n")
	return line + "\n"
}

// A line over the bound is reported with its own number, not the number
// of the line before it.
func TestExportFileLongLineNumber(t *testing.T) {
	header := exportFileHeader(t, 1)
	for _, c := range []struct {
		file, want string
	}{
		{strings.Repeat("x", 2000) + "\n", "line 1: line is longer than 1024 bytes"},
		{header + strings.Repeat("x", 2000) + "\n", "line 2: line is longer than 1024 bytes"},
		{header + strings.Repeat("x", 2000), "line 2: line is longer than 1024 bytes"},
	} {
		fr := NewExportFileReader(strings.NewReader(c.file))
		fr.maxLine = 1024
		var err error
		for err == nil {
			_, err = fr.Next()
		}
		if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.20q...: %v; want %s", c.file, err, c.want)
		}
	}
}

// An export file's line nesting deeply is refused at once (the CLI's
// import reads the file with this reader before anything is sent).
func TestExportFileDeepLine(t *testing.T) {
	header := exportFileHeader(t, 1)
	for file, want := range map[string]string{
		nestedArray(100_000) + "\n":          "line 1: the JSON value nests",
		header + nestedArray(100_000) + "\n": "line 2: the JSON value nests",
	} {
		_, err := drain(NewExportFileReader(strings.NewReader(file)))
		if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "limit of 128 levels") {
			t.Errorf("%.20q...: %v; want %s", file, err, want)
		}
	}
}

// drain reads fr to its end; the error is nil at a clean io.EOF.
func drain(fr *ExportFileReader) ([]*sessionv1.ImportChunk, error) {
	var out []*sessionv1.ImportChunk
	for {
		c, err := fr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
}

// The strict check costs what a document's bytes do, however it nests:
// one nesting past the limit is refused at its first bytes, and one as
// deep as allowed all over is read in time linear in its size (compare
// ns/op and B/op between sizes; before the bound, 60 KB nesting 30,000
// deep took over a minute and a gigabyte).
func BenchmarkDecodeStrictDeep(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 4 << 20} {
		tooDeep := []byte(nestedArray(size / 2))
		atLimit := "[" + strings.Repeat(nestedArray(jsonobj.MaxDepth-1)+",", size/(2*jsonobj.MaxDepth)) + "0]"
		for name, data := range map[string][]byte{"too_deep": tooDeep, "at_limit": []byte(atLimit)} {
			b.Run(fmt.Sprintf("%s/%dKiB", name, size>>10), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if err := decodeStrict(data, &exportDoc{}); !errors.Is(err, errs.ErrInvalidArgument) {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

func sessionExportCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.ExportSessionRequest{}
	var out string
	c := &cobra.Command{
		Use:   "export",
		Short: "Export a session with its messages and plan links",
		Long: "Without --out, export prints {\"data\":...,\"checksum\":...}: the whole export in one reply, for\n" +
			"sessions whose export fits one (4 MiB).\n\n" +
			"With --out, export streams the session (ExportStream) into the file, one page at a time, as\n" +
			"JSON Lines (a header line, one line per message, a trailer line with the checksum), and prints\n" +
			"{\"checksum\":...}. Any size works; the file appears only once complete. `node session import\n" +
			"--file` takes it back. --timeout bounds the wait for each page, not the whole export.",
	}
	sessionFlag(c, &req.SessionId)
	c.Flags().StringVar(&out, "out", "", "stream the export into this file (JSON Lines)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		if out == "" {
			return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
				return sessionv1.NewSessionServiceClient(cl.conn).Export(ctx, req)
			})
		}
		sum, err := exportToFile(cmd.Context(), cl, req, out)
		if err != nil {
			return err
		}
		return cl.print(&sessionv1.ExportSessionResponse{Checksum: sum})
	})
	return c
}

// exportToFile streams the export into a temporary file next to path and
// renames it to path once the trailer is written and synced, so that path
// never holds a partial export.
func exportToFile(parent context.Context, cl *client, req *sessionv1.ExportSessionRequest, path string) (string, error) {
	ctx, progress, done := cl.streamCtx(parent)
	defer done()
	stream, err := sessionv1.NewSessionServiceClient(cl.conn).ExportStream(ctx, req)
	if err != nil {
		return "", cl.streamErr(ctx, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return "", fmt.Errorf("write export: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename: no such file
	defer tmp.Close()
	fw := session.NewExportFileWriter(tmp)
	for {
		c, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", cl.streamErr(ctx, err)
		}
		progress()
		if err := fw.WriteChunk(c); err != nil {
			return "", fmt.Errorf("write export: %w", err)
		}
	}
	if fw.Checksum() == "" {
		return "", fmt.Errorf("export stream ended without its trailer")
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("write export: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write export: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("write export: %w", err)
	}
	return fw.Checksum(), nil
}

func sessionImportCmd(o *clientOptions) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "import",
		Short: "Import an export as a new session",
		Long: "Import reads a file written by export --out (JSON Lines) and streams it to the node\n" +
			"(ImportStream) one page at a time: any size works, and the new session appears only once\n" +
			"all of it arrived and its checksum matched; on any failure nothing of it remains. A file\n" +
			"holding an export's data (the single-document form printed without --out) is sent in one\n" +
			"request, as long as it fits one (4 MiB). --timeout bounds the wait for each page.",
	}
	c.Flags().StringVar(&file, "file", "", "file holding an export, as written by export --out (- for stdin; required)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "file"); err != nil {
			return err
		}
		in := io.Reader(cmd.InOrStdin())
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return fmt.Errorf("read %s: %w", file, err)
			}
			defer f.Close()
			in = f
		}
		br := bufio.NewReaderSize(in, 256<<10)
		if !session.IsExportFile(br) {
			b, err := io.ReadAll(br)
			if err != nil {
				return fmt.Errorf("read %s: %w", file, err)
			}
			return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
				return sessionv1.NewSessionServiceClient(cl.conn).Import(ctx, &sessionv1.ImportSessionRequest{Data: string(b)})
			})
		}
		resp, err := importFromFile(cmd.Context(), cl, br)
		if err != nil {
			return err
		}
		return cl.print(resp)
	})
	return c
}

// importFromFile streams an export file to ImportStream. A file error ends
// the stream by cancelling it, which makes the node drop what it staged.
func importFromFile(parent context.Context, cl *client, r io.Reader) (*sessionv1.ImportSessionResponse, error) {
	ctx, progress, done := cl.streamCtx(parent)
	defer done()
	stream, err := sessionv1.NewSessionServiceClient(cl.conn).ImportStream(ctx)
	if err != nil {
		return nil, cl.streamErr(ctx, err)
	}
	fr := session.NewExportFileReader(r)
	complete := false // the trailer was sent: the node may make the session visible
	for {
		c, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := stream.Send(c); err != nil {
			// io.EOF: the node ended the stream; its answer says why.
			if err == io.EOF {
				break
			}
			return nil, cl.streamErr(ctx, err)
		}
		complete = complete || c.GetTrailer() != nil
		progress()
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, importErr(cl.streamErr(ctx, err), complete)
	}
	return resp, nil
}

// importErr tells the truth about a failed import stream. Before the
// trailer reached the node nothing of the import can be visible, and a
// broken stream is UNAVAILABLE (import again). Once the trailer was sent the
// node may have stored the session when the stream broke: that is
// OUTCOME_UNKNOWN, since a second import would store a second copy. (The
// node's own UNAVAILABLE answers after the trailer — its store refusing the
// last writes — look the same to the client and are reported unknown too:
// the cautious side.)
func importErr(err error, complete bool) error {
	e, ok := remoteError(err)
	if !complete || !ok || e.Code != errs.UnavailableCode {
		return err
	}
	return errs.OutcomeUnknown("the import stream broke after its last chunk was sent (%s); the session may have been imported: look for it (session list) before importing again", e.Msg)
}

// errStreamIdle ends a stream that made no progress for --timeout.
var errStreamIdle = errors.New("no progress")

// streamCtx is the context of a streaming call: instead of one deadline
// for the whole call (a large export takes as long as it takes) a watchdog
// that ends the call when no chunk went through for --timeout; progress
// rearms it. The token comes with the connection.
func (c *client) streamCtx(parent context.Context) (ctx context.Context, progress func(), done func()) {
	ctx, cancel := context.WithCancelCause(parent)
	t := time.AfterFunc(c.timeout, func() { cancel(errStreamIdle) })
	return ctx, func() { t.Reset(c.timeout) }, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// streamErr is err, or says the watchdog of streamCtx ended the call.
func (c *client) streamErr(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errStreamIdle) {
		return errs.Unavailable("no progress for %v (--timeout); the stream was abandoned", c.timeout)
	}
	return err
}

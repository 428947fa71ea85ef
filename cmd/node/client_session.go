package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentstate/agentstate/actors/session"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func newSessionCommand() *cobra.Command {
	o := &clientOptions{}
	c := &cobra.Command{Use: "session", Short: "Sessions: create, append, read, export and import conversations"}
	o.register(c)
	c.AddCommand(
		sessionCreateCmd(o), sessionGetCmd(o), sessionListCmd(o), sessionAppendCmd(o),
		sessionMessagesCmd(o), sessionCloseCmd(o), sessionDeleteCmd(o), sessionExportCmd(o),
		sessionImportCmd(o), sessionUsageCmd(o), sessionLinkPlanCmd(o), sessionTailCmd(o),
		sessionStateCmd(o), sessionTruncateCmd(o), sessionSnapshotCmd(o), sessionExpireCmd(o),
	)
	return c
}

func sessionCreateCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.CreateSessionRequest{}
	c := &cobra.Command{Use: "create", Short: "Create a session (idempotent when --id is given)"}
	c.Flags().StringVar(&req.SessionId, "id", "", "session id (a ULID); a new one when empty")
	c.Flags().StringVar(&req.ActorName, "actor", "", "name of the actor that owns the conversation")
	c.Flags().StringVar(&req.Namespace, "namespace", "", `namespace (default "local")`)
	c.Flags().StringVar(&req.Automation, "automation", "", "automation profile name")
	c.Flags().StringVar(&req.MetadataJson, "metadata", "", "metadata, a JSON object")
	c.Flags().StringVar(&req.ClientKey, "client-key", "", "the client's name for the session, unique in its namespace")
	var ttl time.Duration
	c.Flags().DurationVar(&ttl, "ttl", 0, "delete the session this long after its creation (e.g. 720h)")
	var d deltaFlags
	d.register(c)
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if cmd.Flags().Changed("ttl") {
			req.Ttl = durationpb.New(ttl)
		}
		var err error
		if req.StateDelta, req.ScopeDeltas, err = d.deltas(cmd); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).Create(ctx, req)
		})
	})
	return c
}

// sessionFlag adds the --session flag every per-session command needs.
func sessionFlag(c *cobra.Command, p *string) {
	c.Flags().StringVar(p, "session", "", "session id (required)")
}

func sessionGetCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.GetSessionRequest{}
	c := &cobra.Command{Use: "get", Short: "Show a session (by --session, or by --client-key in --namespace)"}
	sessionFlag(c, &req.SessionId)
	c.Flags().StringVar(&req.ClientKey, "client-key", "", "find the session by its client key instead")
	c.Flags().StringVar(&req.Namespace, "namespace", "", `the client key's namespace (default "local")`)
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if (req.SessionId == "") == (req.ClientKey == "") {
			return usagef(cmd, "give --session or --client-key")
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).Get(ctx, req)
		})
	})
	return c
}

func sessionListCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.ListSessionsRequest{}
	var state string
	var all bool
	c := &cobra.Command{Use: "list", Short: "List sessions, one page per line (--all follows the cursor)"}
	c.Flags().StringVar(&req.ActorName, "actor", "", "only sessions of this actor")
	c.Flags().StringVar(&req.Namespace, "namespace", "", "only sessions in this namespace")
	c.Flags().StringVar(&state, "state", "", "only sessions in this state: active or closed")
	c.Flags().Int32Var(&req.Limit, "limit", 0, "page size (default 100, at most 1000)")
	c.Flags().StringVar(&req.Cursor, "cursor", "", "next_cursor of a previous page")
	c.Flags().BoolVar(&all, "all", false, "fetch every page")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		st, err := parseSessionState(state)
		if err != nil {
			return usagef(cmd, "%v", err)
		}
		req.State = st
		api := sessionv1.NewSessionServiceClient(cl.conn)
		return pages(cmd, cl, all,
			func(ctx context.Context) (*sessionv1.ListSessionsResponse, error) { return api.List(ctx, req) },
			func(r *sessionv1.ListSessionsResponse) bool {
				req.Cursor = r.GetNextCursor()
				return req.Cursor != ""
			})
	})
	return c
}

func sessionAppendCmd(o *clientOptions) *cobra.Command {
	var (
		sessionID, role, content, metadata, file string
		pairs, messageIDs                        []string
	)
	c := &cobra.Command{
		Use:   "append",
		Short: "Append one atomic turn of messages to a session",
		Long: "Append one atomic turn: all its messages are stored with consecutive sequences, or none is.\n\n" +
			"Give one message with --role/--content (and optionally --message-id, --metadata), several\n" +
			"with repeated --message role=content, or a JSON file (--file, - for stdin) holding an array\n" +
			`of {"role":"user","content":"...","message_id":"<ULID>","metadata":{...}}.` + "\n" +
			"Every message gets its id (a ULID) before the first attempt: the one given, or a new one.\n" +
			"The ids are printed with the answer, and with the error if the append failed: a retry\n" +
			"with the same message ids (--message-id, or message_id in the file) returns the original\n" +
			"sequences and stores nothing, so an append that exited 11 (outcome unknown) or 8 can be\n" +
			"retried safely.",
	}
	sessionFlag(c, &sessionID)
	c.Flags().StringVar(&role, "role", "", "role of the message: user, assistant, system or tool")
	c.Flags().StringVar(&content, "content", "", "content of the message")
	c.Flags().StringArrayVar(&messageIDs, "message-id", nil,
		"message id (a ULID) that makes a retry idempotent; with --message, one per --message in order (default: new ones)")
	c.Flags().StringVar(&metadata, "metadata", "", "metadata of the message, a JSON object")
	c.Flags().StringArrayVar(&pairs, "message", nil, "a message as role=content; repeat for a multi-message turn")
	c.Flags().StringVar(&file, "file", "", "JSON file with the turn's messages (- for stdin)")
	var (
		d         deltaFlags
		expect    int64
		eventTime string
	)
	d.register(c)
	c.Flags().Int64Var(&expect, "expect", 0, "append only if the session's next sequence is this")
	c.Flags().StringVar(&eventTime, "event-time", "", "the client's time of the message (RFC 3339), with --role/--content")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		req := &sessionv1.AppendRequest{SessionId: sessionID}
		var err error
		if req.StateDelta, req.ScopeDeltas, err = d.deltas(cmd); err != nil {
			return err
		}
		if cmd.Flags().Changed("expect") {
			req.ExpectedNextSequence = &expect
		}
		event, err := timeFlag(cmd, "event-time", eventTime)
		if err != nil {
			return err
		}
		single := cmd.Flags().Changed("role") || cmd.Flags().Changed("content")
		sources := 0
		for _, set := range []bool{single, len(pairs) > 0, file != ""} {
			if set {
				sources++
			}
		}
		if sources != 1 {
			return usagef(cmd, "give the messages one way: --role/--content, --message, or --file")
		}
		switch {
		case single:
			// An empty message is stored only when asked for by name
			// (--content ""): a forgotten --content is a mistake.
			if !cmd.Flags().Changed("content") {
				return usagef(cmd, `--content is required with --role (give --content "" for an empty message)`)
			}
			r, err := parseRole(role)
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			req.Messages = []*sessionv1.NewMessage{{Role: r, Content: content, MetadataJson: metadata, EventTime: event}}
		case len(pairs) > 0:
			for _, p := range pairs {
				rs, text, ok := strings.Cut(p, "=")
				r, err := parseRole(rs)
				if !ok || err != nil {
					return usagef(cmd, "--message %q: want role=content with role user, assistant, system or tool", p)
				}
				req.Messages = append(req.Messages, &sessionv1.NewMessage{Role: r, Content: text})
			}
		default:
			b, err := readInput(cmd, file)
			if err != nil {
				return err
			}
			if req.Messages, err = parseTurnFile(b); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
		}
		if err := setMessageIDs(cmd, req.Messages, messageIDs); err != nil {
			return err
		}
		err = call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).Append(ctx, req)
		})
		if err != nil {
			return &appendFailed{err: err, messageIDs: idsOf(req.Messages)}
		}
		return nil
	})
	return c
}

// setMessageIDs gives every message of a turn its id before the first
// attempt: the --message-id flags in order (with --file, the file's ids
// instead), else a new ULID. An id chosen here rather than by the node
// is what makes the retry after an unknown outcome safe: it is the same.
func setMessageIDs(cmd *cobra.Command, msgs []*sessionv1.NewMessage, flagged []string) error {
	if len(flagged) > 0 {
		if cmd.Flags().Changed("file") {
			return usagef(cmd, "--message-id does not go with --file: give message_id in the file")
		}
		if len(flagged) != len(msgs) {
			return usagef(cmd, "%d --message-id for %d messages: give one per message, or none", len(flagged), len(msgs))
		}
		for i, id := range flagged {
			msgs[i].MessageId = id
		}
	}
	for _, m := range msgs {
		if m.MessageId == "" {
			m.MessageId = ids.New()
		}
	}
	return nil
}

func idsOf(msgs []*sessionv1.NewMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.MessageId
	}
	return out
}

// appendFailed is a failed append with its messages' ids, which the error
// output names (writeError) so that the append can be retried with them.
type appendFailed struct {
	err        error
	messageIDs []string
}

func (e *appendFailed) Error() string { return e.err.Error() }
func (e *appendFailed) Unwrap() error { return e.err }

// turnFileMessage is one message of an append --file.
type turnFileMessage struct {
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	MessageID string          `json:"message_id"`
	Metadata  json.RawMessage `json:"metadata"`
}

func parseTurnFile(b []byte) ([]*sessionv1.NewMessage, error) {
	// Each message's metadata nests as the node allows (jsonobj.MaxDepth),
	// inside the array and the message's object.
	if err := jsonobj.CheckDepth("the file", b, jsonobj.MaxDepth+2); err != nil {
		return nil, err
	}
	var in []turnFileMessage
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("want a JSON array of messages: %w", err)
	}
	out := make([]*sessionv1.NewMessage, 0, len(in))
	for i, m := range in {
		r, err := parseRole(m.Role)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		nm := &sessionv1.NewMessage{Role: r, Content: m.Content, MessageId: m.MessageID}
		if len(m.Metadata) > 0 && string(m.Metadata) != "null" {
			nm.MetadataJson = string(m.Metadata)
		}
		out = append(out, nm)
	}
	return out, nil
}

func sessionMessagesCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.ListMessagesRequest{}
	var all bool
	c := &cobra.Command{Use: "messages", Short: "List a session's messages in sequence order, one page per line"}
	sessionFlag(c, &req.SessionId)
	c.Flags().Int64Var(&req.FromSequence, "from", 0, "first sequence to list")
	c.Flags().Int32Var(&req.Limit, "limit", 0, "page size (default 100, at most 1000; a page also stops at about 1 MiB of messages)")
	c.Flags().BoolVar(&all, "all", false, "fetch every page")
	var after, before string
	c.Flags().StringVar(&after, "after", "", "only messages whose event time is after this (RFC 3339)")
	c.Flags().StringVar(&before, "before", "", "only messages whose event time is before this (RFC 3339)")
	c.Flags().Int32Var(&req.Last, "last", 0, "only the last N messages (of those selected), in one reply")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		var err error
		if req.AfterTime, err = timeFlag(cmd, "after", after); err != nil {
			return err
		}
		if req.BeforeTime, err = timeFlag(cmd, "before", before); err != nil {
			return err
		}
		api := sessionv1.NewSessionServiceClient(cl.conn)
		return pages(cmd, cl, all,
			func(ctx context.Context) (*sessionv1.ListMessagesResponse, error) { return api.ListMessages(ctx, req) },
			func(r *sessionv1.ListMessagesResponse) bool {
				if len(r.GetMessages()) == 0 || r.GetNextSequence() <= req.FromSequence {
					return false
				}
				req.FromSequence = r.GetNextSequence()
				return true
			})
	})
	return c
}

func sessionCloseCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.CloseSessionRequest{}
	c := &cobra.Command{Use: "close", Short: "Close a session: appends are refused, reads still work"}
	sessionFlag(c, &req.SessionId)
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).Close(ctx, req)
		})
	})
	return c
}

func sessionDeleteCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.DeleteSessionRequest{}
	var yes bool
	c := &cobra.Command{Use: "delete", Short: "Delete a session and its messages (plans survive it)"}
	sessionFlag(c, &req.SessionId)
	c.Flags().BoolVar(&yes, "yes", false, "confirm the deletion (required)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		if !yes {
			return usagef(cmd, "deleting a session cannot be undone; confirm with --yes")
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).Delete(ctx, req)
		})
	})
	return c
}

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

func sessionUsageCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.UpdateTokenUsageRequest{}
	c := &cobra.Command{Use: "usage", Short: "Add token usage and cost to a session's totals"}
	sessionFlag(c, &req.SessionId)
	c.Flags().Int64Var(&req.InputTokens, "input-tokens", 0, "input tokens to add")
	c.Flags().Int64Var(&req.OutputTokens, "output-tokens", 0, "output tokens to add")
	c.Flags().Float64Var(&req.Cost, "cost", 0, "cost to add")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).UpdateTokenUsage(ctx, req)
		})
	})
	return c
}

func sessionLinkPlanCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.LinkPlanRequest{Plan: &sessionv1.LinkedPlan{}}
	c := &cobra.Command{Use: "link-plan", Short: "Link a plan to a session (or update the link's phase and state)"}
	sessionFlag(c, &req.SessionId)
	c.Flags().StringVar(&req.Plan.PlanId, "plan", "", "plan id (required)")
	c.Flags().StringVar(&req.Plan.Phase, "phase", "", "the plan's phase")
	c.Flags().StringVar(&req.Plan.State, "state", "", "the plan's processing state")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session", "plan"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).LinkPlan(ctx, req)
		})
	})
	return c
}

func parseRole(s string) (sessionv1.Role, error) {
	key := "ROLE_" + strings.ToUpper(strings.TrimPrefix(strings.ToUpper(s), "ROLE_"))
	if v, ok := sessionv1.Role_value[key]; ok && v != 0 {
		return sessionv1.Role(v), nil
	}
	return 0, fmt.Errorf("role %q: want user, assistant, system or tool", s)
}

func parseSessionState(s string) (sessionv1.SessionState, error) {
	if s == "" {
		return sessionv1.SessionState_SESSION_STATE_UNSPECIFIED, nil
	}
	key := "SESSION_STATE_" + strings.TrimPrefix(strings.ToUpper(s), "SESSION_STATE_")
	if v, ok := sessionv1.SessionState_value[key]; ok && v != 0 {
		return sessionv1.SessionState(v), nil
	}
	return 0, fmt.Errorf("state %q: want active or closed", s)
}

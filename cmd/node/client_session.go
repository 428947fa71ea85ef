package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/session/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

func newSessionCommand() *cobra.Command {
	o := &clientOptions{}
	c := &cobra.Command{Use: "session", Short: "Sessions: create, append, read, export and import conversations"}
	o.register(c)
	c.AddCommand(
		sessionCreateCmd(o), sessionGetCmd(o), sessionListCmd(o), sessionAppendCmd(o),
		sessionMessagesCmd(o), sessionCloseCmd(o), sessionDeleteCmd(o), sessionExportCmd(o),
		sessionImportCmd(o), sessionUsageCmd(o), sessionLinkPlanCmd(o),
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
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
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
	c := &cobra.Command{Use: "get", Short: "Show a session"}
	sessionFlag(c, &req.SessionId)
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
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
		sessionID, role, content, messageID, metadata, file string
		pairs                                               []string
	)
	c := &cobra.Command{
		Use:   "append",
		Short: "Append one atomic turn of messages to a session",
		Long: "Append one atomic turn: all its messages are stored with consecutive sequences, or none is.\n\n" +
			"Give one message with --role/--content (and optionally --message-id, --metadata), several\n" +
			"with repeated --message role=content, or a JSON file (--file, - for stdin) holding an array\n" +
			`of {"role":"user","content":"...","message_id":"<ULID>","metadata":{...}}.` + "\n" +
			"A retry with the same message ids returns the original sequences and stores nothing.",
	}
	sessionFlag(c, &sessionID)
	c.Flags().StringVar(&role, "role", "", "role of the message: user, assistant, system or tool")
	c.Flags().StringVar(&content, "content", "", "content of the message")
	c.Flags().StringVar(&messageID, "message-id", "", "client-chosen message id (a ULID) that makes a retry idempotent")
	c.Flags().StringVar(&metadata, "metadata", "", "metadata of the message, a JSON object")
	c.Flags().StringArrayVar(&pairs, "message", nil, "a message as role=content; repeat for a multi-message turn")
	c.Flags().StringVar(&file, "file", "", "JSON file with the turn's messages (- for stdin)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		req := &sessionv1.AppendRequest{SessionId: sessionID}
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
			req.Messages = []*sessionv1.NewMessage{{Role: r, Content: content, MessageId: messageID, MetadataJson: metadata}}
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
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).Append(ctx, req)
		})
	})
	return c
}

// turnFileMessage is one message of an append --file.
type turnFileMessage struct {
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	MessageID string          `json:"message_id"`
	Metadata  json.RawMessage `json:"metadata"`
}

func parseTurnFile(b []byte) ([]*sessionv1.NewMessage, error) {
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
	c.Flags().Int32Var(&req.Limit, "limit", 0, "page size (default 100, at most 1000)")
	c.Flags().BoolVar(&all, "all", false, "fetch every page")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
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
		Long: "Export prints {\"data\":...,\"checksum\":...}. With --out it also writes data to a file,\n" +
			"which `node session import --file` takes back.",
	}
	sessionFlag(c, &req.SessionId)
	c.Flags().StringVar(&out, "out", "", "also write the export's data to this file")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		ctx, cancel := cl.ctx(cmd.Context())
		defer cancel()
		resp, err := sessionv1.NewSessionServiceClient(cl.conn).Export(ctx, req)
		if err != nil {
			return err
		}
		if out != "" {
			if err := os.WriteFile(out, []byte(resp.GetData()), 0o600); err != nil {
				return fmt.Errorf("write export: %w", err)
			}
		}
		return cl.print(resp)
	})
	return c
}

func sessionImportCmd(o *clientOptions) *cobra.Command {
	var file string
	c := &cobra.Command{Use: "import", Short: "Import an export's data as a new session"}
	c.Flags().StringVar(&file, "file", "", "file holding an export's data, as written by export --out (- for stdin; required)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "file"); err != nil {
			return err
		}
		b, err := readInput(cmd, file)
		if err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).Import(ctx, &sessionv1.ImportSessionRequest{Data: string(b)})
		})
	})
	return c
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

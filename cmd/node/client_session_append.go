package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/jsonobj"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

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
			`of {"role":"user","content":"...","message_id":"<ULID>","metadata":{...},` + "\n" +
			`"item_key":"...","kind":"...","keep_stored":true} (the last three optional).` + "\n" +
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
	var items itemFlags
	items.register(c)
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
		if items.set() && !single {
			return usagef(cmd, "--item-key, --kind and --keep-stored go with --role/--content (in --file, give item_key, kind and keep_stored)")
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
			items.apply(req.Messages[0])
		case len(pairs) > 0:
			if req.Messages, err = pairMessages(cmd, pairs); err != nil {
				return err
			}
		default:
			if req.Messages, err = fileMessages(cmd, file); err != nil {
				return err
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
// pairMessages are the new messages of --message role=content pairs.
func pairMessages(cmd *cobra.Command, pairs []string) ([]*sessionv1.NewMessage, error) {
	out := make([]*sessionv1.NewMessage, 0, len(pairs))
	for _, p := range pairs {
		rs, text, ok := strings.Cut(p, "=")
		r, err := parseRole(rs)
		if !ok || err != nil {
			return nil, usagef(cmd, "--message %q: want role=content with role user, assistant, system or tool", p)
		}
		out = append(out, &sessionv1.NewMessage{Role: r, Content: text})
	}
	return out, nil
}

// fileMessages are the new messages of a turn file (parseTurnFile; "-"
// is stdin).
func fileMessages(cmd *cobra.Command, file string) ([]*sessionv1.NewMessage, error) {
	b, err := readInput(cmd, file)
	if err != nil {
		return nil, err
	}
	msgs, err := parseTurnFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return msgs, nil
}

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
	ItemKey   string          `json:"item_key"`
	Kind      string          `json:"kind"`
	// KeepStored: if the session holds item_key already, keep that message.
	KeepStored bool `json:"keep_stored"`
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
		nm := &sessionv1.NewMessage{Role: r, Content: m.Content, MessageId: m.MessageID, ItemKey: m.ItemKey, Kind: m.Kind}
		if m.KeepStored {
			nm.OnKeyConflict = sessionv1.KeyConflict_KEY_CONFLICT_KEEP_STORED
		}
		if len(m.Metadata) > 0 && string(m.Metadata) != "null" {
			nm.MetadataJson = string(m.Metadata)
		}
		out = append(out, nm)
	}
	return out, nil
}

func parseRole(s string) (sessionv1.Role, error) {
	key := "ROLE_" + strings.ToUpper(strings.TrimPrefix(strings.ToUpper(s), "ROLE_"))
	if v, ok := sessionv1.Role_value[key]; ok && v != 0 {
		return sessionv1.Role(v), nil
	}
	return 0, fmt.Errorf("role %q: want user, assistant, system or tool", s)
}

package main

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

// The CLI verbs of keyed items (issue 30): read one message by its item
// key, and list a session's messages by kind and key prefix. Append gives
// keys with --item-key, --kind and --keep-stored (or item_key, kind and
// keep_stored in its --file).

func sessionGetItemCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.GetItemRequest{}
	c := &cobra.Command{
		Use:   "get-item",
		Short: "Show the message a session holds under an item key",
		Long:  "get-item prints {\"message\":{...}}; a key the session does not hold exits as NOT_FOUND.",
	}
	sessionFlag(c, &req.SessionId)
	c.Flags().StringVar(&req.ItemKey, "key", "", "the item key (required)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session", "key"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).GetItem(ctx, req)
		})
	})
	return c
}

func sessionItemsCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.ListItemsRequest{}
	var (
		all    bool
		cursor int64
	)
	c := &cobra.Command{
		Use:   "items",
		Short: "List a session's messages by kind and item-key prefix, one page per line",
		Long: "items lists the session's messages of --kind whose item key starts with --prefix (either may be\n" +
			"left out; without --prefix, messages without a key are listed too), oldest first or, with\n" +
			"--newest, newest first. A page's next_cursor_sequence is the --cursor of the next one; --all\n" +
			"follows it to the end.",
	}
	sessionFlag(c, &req.SessionId)
	c.Flags().StringVar(&req.Kind, "kind", "", "only messages of this kind")
	c.Flags().StringVar(&req.KeyPrefix, "prefix", "", "only messages whose item key starts with this")
	c.Flags().BoolVar(&req.NewestFirst, "newest", false, "newest first (descending sequence)")
	c.Flags().Int32Var(&req.Limit, "limit", 0, "page size (default 100, at most 1000; a page also stops at about 1 MiB of messages)")
	c.Flags().Int64Var(&cursor, "cursor", 0, "next_cursor_sequence of a previous page")
	c.Flags().BoolVar(&all, "all", false, "fetch every page")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		if cmd.Flags().Changed("cursor") {
			req.CursorSequence = &cursor
		}
		api := sessionv1.NewSessionServiceClient(cl.conn)
		return pages(cmd, cl, all,
			func(ctx context.Context) (*sessionv1.ListItemsResponse, error) { return api.ListItems(ctx, req) },
			func(r *sessionv1.ListItemsResponse) bool {
				req.CursorSequence = r.NextCursorSequence
				return req.CursorSequence != nil
			})
	})
	return c
}

// itemFlags are append's --item-key, --kind and --keep-stored, for its
// single message (--role/--content).
type itemFlags struct {
	key, kind string
	keep      bool
}

func (f *itemFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.key, "item-key", "", "the message's item key, unique in the session (with --role/--content)")
	c.Flags().StringVar(&f.kind, "kind", "", "the message's kind, e.g. checkpoint (with --role/--content)")
	c.Flags().BoolVar(&f.keep, "keep-stored", false, "if the session holds --item-key already, keep that message and store this turn's others")
}

// apply gives m the flags' key, kind and policy.
func (f *itemFlags) apply(m *sessionv1.NewMessage) {
	m.ItemKey, m.Kind = f.key, f.kind
	if f.keep {
		m.OnKeyConflict = sessionv1.KeyConflict_KEY_CONFLICT_KEEP_STORED
	}
}

// set reports whether any flag was given: they go with a single message.
func (f *itemFlags) set() bool { return f.key != "" || f.kind != "" || f.keep }

package main

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

// The history operations of issue 30 that change a history or a group:
// replace-suffix and delete-group.

func sessionReplaceSuffixCmd(o *clientOptions) *cobra.Command {
	var (
		sessionID, file    string
		pairs, messageIDs  []string
		from, last, expect int64
		d                  deltaFlags
	)
	c := &cobra.Command{
		Use:   "replace-suffix",
		Short: "Atomically replace a session's newest messages (if its next sequence is --expect)",
		Long: "Remove the messages from --from on (or the last --remove-last) and store new ones in their\n" +
			"place, from the cut on, in one atomic write, if the session's next sequence is --expect.\n" +
			"The removed messages are printed with the answer. New messages are given with repeated\n" +
			"--message role=content or a JSON --file as for append; each gets its id before the first\n" +
			"attempt, so a retry with the same ids (--message-id, message_id in the file) is a no-op\n" +
			"that answers duplicate: true.",
	}
	sessionFlag(c, &sessionID)
	c.Flags().Int64Var(&from, "from", 0, "remove the messages with sequence >= this")
	c.Flags().Int64Var(&last, "remove-last", 0, "remove the last this many messages")
	c.Flags().Int64Var(&expect, "expect", 0, "the session's next sequence (required)")
	c.Flags().StringArrayVar(&pairs, "message", nil, "a new message as role=content; repeat for several")
	c.Flags().StringArrayVar(&messageIDs, "message-id", nil, "message id (a ULID) of each --message, in order (default: new ones)")
	c.Flags().StringVar(&file, "file", "", "JSON file with the new messages (- for stdin)")
	d.register(c)
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session", "expect"); err != nil {
			return err
		}
		req := &sessionv1.ReplaceSuffixRequest{SessionId: sessionID, ExpectedNextSequence: &expect}
		switch f, l := cmd.Flags().Changed("from"), cmd.Flags().Changed("remove-last"); {
		case f == l:
			return usagef(cmd, "give one of --from and --remove-last")
		case f:
			req.From = &sessionv1.ReplaceSuffixRequest_FromSequence{FromSequence: from}
		default:
			req.From = &sessionv1.ReplaceSuffixRequest_RemoveLast{RemoveLast: last}
		}
		var err error
		if req.StateDelta, req.ScopeDeltas, err = d.deltas(cmd); err != nil {
			return err
		}
		if len(pairs) > 0 && file != "" {
			return usagef(cmd, "give the new messages one way: --message or --file")
		}
		if len(pairs) > 0 {
			req.Messages, err = pairMessages(cmd, pairs)
		} else if file != "" {
			req.Messages, err = fileMessages(cmd, file)
		}
		if err != nil {
			return err
		}
		if err := setMessageIDs(cmd, req.Messages, messageIDs); err != nil {
			return err
		}
		err = call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).ReplaceSuffix(ctx, req)
		})
		if err != nil && len(req.Messages) > 0 {
			return &appendFailed{err: err, messageIDs: idsOf(req.Messages)}
		}
		return err
	})
	return c
}

func sessionDeleteGroupCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.DeleteSessionsRequest{}
	c := &cobra.Command{
		Use:   "delete-group",
		Short: "Delete every session of a namespace whose client key starts with a prefix, atomically",
		Long: "Deletes the namespace's sessions whose client key starts with --prefix in one atomic write:\n" +
			"all of them or none. At most 1,000 sessions; a larger group is refused and nothing deleted.",
	}
	c.Flags().StringVar(&req.Namespace, "namespace", "", `namespace (default "local")`)
	c.Flags().StringVar(&req.ClientKeyPrefix, "prefix", "", "client-key prefix (required)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "prefix"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).DeleteSessions(ctx, req)
		})
	})
	return c
}

func sessionStateScopesCmd(o *clientOptions) *cobra.Command {
	var (
		d         deltaFlags
		requestID string
	)
	c := &cobra.Command{
		Use:   "update-scopes",
		Short: "Change a shared scope without a session (atomic and audited)",
		Long: "Applies --set/--delete to the shared scope --scope, with no session. With --request-id a\n" +
			"retry of the same change is a no-op that prints the scope as it stands (duplicate: true).",
	}
	d.register(c)
	c.Flags().StringVar(&requestID, "request-id", "", "an id (printable ASCII) that makes a retry a no-op")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "scope"); err != nil {
			return err
		}
		_, scopes, err := d.deltas(cmd)
		if err != nil {
			return err
		}
		if len(scopes) == 0 {
			return usagef(cmd, "give --set or --delete")
		}
		req := &sessionv1.UpdateScopesRequest{ScopeDeltas: scopes, RequestId: requestID}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).UpdateScopes(ctx, req)
		})
	})
	return c
}

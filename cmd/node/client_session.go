package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
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
		sessionGetItemCmd(o), sessionItemsCmd(o),
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

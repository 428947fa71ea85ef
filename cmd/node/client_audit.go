package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func newAuditCommand() *cobra.Command {
	o := &clientOptions{}
	c := &cobra.Command{Use: "audit", Short: "Audit trail: list, count, verify the hash chain, prune"}
	o.register(c)
	c.AddCommand(auditListCmd(o), auditCountCmd(o), auditGetCmd(o), auditVerifyCmd(o), auditPruneCmd(o),
		auditRecordCmd(o), auditFlushCmd(o), auditTailCmd(o))
	return c
}

// filterFlags are the entry filters shared by list and count.
type filterFlags struct {
	f            auditv1.Filter
	since, until string
}

func (ff *filterFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&ff.f.EventType, "type", "", "only entries of this event type")
	c.Flags().StringVar(&ff.f.PlanId, "plan", "", "only entries about this plan")
	c.Flags().StringVar(&ff.f.SessionId, "session", "", "only entries about this session")
	c.Flags().StringVar(&ff.f.ActorName, "actor", "", "only entries of this actor")
	c.Flags().StringVar(&ff.f.Principal, "principal", "", "only entries caused by this authenticated principal")
	c.Flags().StringVar(&ff.f.Namespace, "namespace", "", "only entries of this namespace")
	c.Flags().StringVar(&ff.since, "since", "", "only entries created at or after this time (RFC 3339, or a duration ago such as 24h)")
	c.Flags().StringVar(&ff.until, "until", "", "only entries created before this time (RFC 3339, or a duration ago)")
}

func (ff *filterFlags) build(cmd *cobra.Command) (*auditv1.Filter, error) {
	f := &auditv1.Filter{EventType: ff.f.EventType, PlanId: ff.f.PlanId, SessionId: ff.f.SessionId, ActorName: ff.f.ActorName,
		Principal: ff.f.Principal, Namespace: ff.f.Namespace}
	var err error
	if ff.since != "" {
		if f.Since, err = parseInstant(ff.since); err != nil {
			return nil, usagef(cmd, "--since: %v", err)
		}
	}
	if ff.until != "" {
		if f.Until, err = parseInstant(ff.until); err != nil {
			return nil, usagef(cmd, "--until: %v", err)
		}
	}
	return f, nil
}

// parseInstant takes an RFC 3339 time or a duration before now.
func parseInstant(s string) (*timestamppb.Timestamp, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return timestamppb.New(t), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return timestamppb.New(time.Now().Add(-d)), nil
	}
	return nil, fmt.Errorf("%q is neither an RFC 3339 time nor a non-negative duration", s)
}

func auditListCmd(o *clientOptions) *cobra.Command {
	ff := &filterFlags{}
	req := &auditv1.ListRequest{}
	var all bool
	c := &cobra.Command{Use: "list", Short: "List entries in commit order, one page per line"}
	ff.register(c)
	c.Flags().StringVar(&req.AfterEventId, "after", "", "entries committed after this event id (an entry's event_id, or a page's next_cursor; "+
		"audit tail --after takes a position instead)")
	c.Flags().Int32Var(&req.Limit, "limit", 0, "page size (default 100, at most 1000)")
	c.Flags().BoolVar(&all, "all", false, "fetch every page")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if isPosition(req.AfterEventId) {
			return usagef(cmd, "--after %s: audit list --after takes an event id (a ULID, an entry's event_id), not a position "+
				"(positions are for audit tail --after)", req.AfterEventId)
		}
		f, err := ff.build(cmd)
		if err != nil {
			return err
		}
		req.Filter = f
		api := auditv1.NewAuditServiceClient(cl.conn)
		return pages(cmd, cl, all,
			func(ctx context.Context) (*auditv1.ListResponse, error) { return api.List(ctx, req) },
			func(r *auditv1.ListResponse) bool {
				req.AfterEventId = r.GetNextCursor()
				return req.AfterEventId != ""
			})
	})
	return c
}

func auditCountCmd(o *clientOptions) *cobra.Command {
	ff := &filterFlags{}
	c := &cobra.Command{Use: "count", Short: "Count entries"}
	ff.register(c)
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		f, err := ff.build(cmd)
		if err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return auditv1.NewAuditServiceClient(cl.conn).Count(ctx, &auditv1.CountRequest{Filter: f})
		})
	})
	return c
}

func auditGetCmd(o *clientOptions) *cobra.Command {
	req := &auditv1.GetRequest{}
	c := &cobra.Command{Use: "get", Short: "Show one entry"}
	c.Flags().StringVar(&req.EventId, "id", "", "event id (required)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "id"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return auditv1.NewAuditServiceClient(cl.conn).Get(ctx, req)
		})
	})
	return c
}

func auditVerifyCmd(o *clientOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "verify",
		Short: "Verify the hash chain; exits 1 when it is broken",
	}
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		ctx, cancel := cl.ctx(cmd.Context())
		defer cancel()
		resp, err := auditv1.NewAuditServiceClient(cl.conn).Verify(ctx, &auditv1.VerifyRequest{})
		if err != nil {
			return err
		}
		if err := cl.print(resp); err != nil {
			return err
		}
		if !resp.GetOk() {
			return fmt.Errorf("audit chain broken at %s: %s", resp.GetFirstBrokenEventId(), resp.GetReason())
		}
		return nil
	})
	return c
}

func auditPruneCmd(o *clientOptions) *cobra.Command {
	var olderThan string
	c := &cobra.Command{Use: "prune", Short: "Remove entries created before a time; the remaining chain stays verifiable"}
	c.Flags().StringVar(&olderThan, "older-than", "", "RFC 3339 time, or a duration ago such as 720h (required)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "older-than"); err != nil {
			return err
		}
		ts, err := parseInstant(olderThan)
		if err != nil {
			return usagef(cmd, "--older-than: %v", err)
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return auditv1.NewAuditServiceClient(cl.conn).Prune(ctx, &auditv1.PruneRequest{OlderThan: ts})
		})
	})
	return c
}

func auditRecordCmd(o *clientOptions) *cobra.Command {
	req := &auditv1.RecordRequest{}
	c := &cobra.Command{Use: "record", Short: "Record an audit entry"}
	c.Flags().StringVar(&req.EventType, "type", "", "event type (required), a caller's: "+strings.Join(audit.CallerEventTypes(), ", "))
	c.Flags().StringVar(&req.PlanId, "plan", "", "plan the entry is about")
	c.Flags().StringVar(&req.SessionId, "session", "", "session the entry is about")
	c.Flags().StringVar(&req.ProjectName, "project", "", "project name")
	c.Flags().StringVar(&req.ActorName, "actor", "", "actor name")
	c.Flags().StringVar(&req.UserIdentity, "user", "", "user identity")
	c.Flags().StringVar(&req.DetailsJson, "details", "", "details, a JSON object (secrets are masked)")
	c.Flags().BoolVar(&req.Sync, "sync", false, "answer only after the entry is committed")
	c.Flags().StringVar(&req.EventId, "event-id", "", "client-chosen ULID making the record safe to retry: a retry with the same id and content stores nothing and answers the original (duplicate=true)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "type"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return auditv1.NewAuditServiceClient(cl.conn).Record(ctx, req)
		})
	})
	return c
}

func auditFlushCmd(o *clientOptions) *cobra.Command {
	c := &cobra.Command{Use: "flush", Short: "Wait until every accepted entry is committed"}
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return auditv1.NewAuditServiceClient(cl.conn).Flush(ctx, &auditv1.FlushRequest{})
		})
	})
	return c
}

// isPosition reports whether s is a feed position (a number) rather than
// an event id: the two --after flags of audit take one each.
func isPosition(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// positionFlag is audit tail's --after: a feed position, whose parse error
// says what the flag takes when given an event id.
type positionFlag struct{ p *int64 }

func (f positionFlag) String() string { return strconv.FormatInt(*f.p, 10) }
func (f positionFlag) Type() string   { return "position" }

func (f positionFlag) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("audit tail --after takes a position (a number: an entry's \"position\", 0 for the whole trail), " +
			"not an event id (event ids are for audit list --after)")
	}
	*f.p = v
	return nil
}

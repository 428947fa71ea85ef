package audit

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/agentstate/agentstate/persistence"
)

// Page sizes of List.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// List returns entries in commit order matching the filter, after the
// cursor req.AfterEventId. It reads on the store's read-only connections,
// never the writer's, and sees every transaction committed before it
// started. NextCursor is empty when the page was not full.
func (s *Service) List(ctx context.Context, req *auditv1.ListRequest) (*auditv1.ListResponse, error) {
	if err := checkFilter(req.GetFilter()); err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	switch {
	case limit < 0 || limit > MaxListLimit:
		return nil, errs.InvalidArgument("limit %d is out of range; want 0 (default %d) to %d", limit, DefaultListLimit, MaxListLimit)
	case limit == 0:
		limit = DefaultListLimit
	}
	after := req.GetAfterEventId()
	if after != "" {
		if err := ids.Check("after_event_id", after); err != nil {
			return nil, err
		}
	}
	es, err := s.reader.ListAudit(ctx, req.GetFilter(), after, limit)
	if err != nil {
		return nil, err
	}
	resp := &auditv1.ListResponse{Entries: es}
	if len(es) == limit {
		resp.NextCursor = es[len(es)-1].GetEventId()
	}
	return resp, nil
}

// Count returns how many entries match the filter.
func (s *Service) Count(ctx context.Context, req *auditv1.CountRequest) (*auditv1.CountResponse, error) {
	if err := checkFilter(req.GetFilter()); err != nil {
		return nil, err
	}
	n, err := s.reader.CountAudit(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &auditv1.CountResponse{Count: n}, nil
}

// Get returns one entry; NOT_FOUND when it is not stored (never was, not
// committed yet, or pruned).
func (s *Service) Get(ctx context.Context, req *auditv1.GetRequest) (*auditv1.GetResponse, error) {
	if err := ids.Check("event_id", req.GetEventId()); err != nil {
		return nil, err
	}
	e, err := s.reader.GetAudit(ctx, req.GetEventId())
	if err != nil {
		return nil, err
	}
	return &auditv1.GetResponse{Entry: e}, nil
}

func checkFilter(f *auditv1.Filter) error {
	if t := f.GetEventType(); t != "" && !registry[t] {
		return errs.InvalidArgument("filter event_type %q is not a known audit event type", clip(t))
	}
	if f.GetSince() != nil {
		if err := f.GetSince().CheckValid(); err != nil {
			return errs.InvalidArgument("filter since: %v", err)
		}
	}
	if f.GetUntil() != nil {
		if err := f.GetUntil().CheckValid(); err != nil {
			return errs.InvalidArgument("filter until: %v", err)
		}
	}
	if f.GetSince() != nil && f.GetUntil() != nil && f.GetUntil().AsTime().Before(f.GetSince().AsTime()) {
		return errs.InvalidArgument("filter until is before since")
	}
	return nil
}

// Prune removes the entries created before req.OlderThan, oldest first,
// and returns how many went. It runs in the writer as a series of
// transactions of at most Config.PruneChunk removals each, queued like any
// other command, so appends keep committing between chunks; it stops after
// the first chunk that removes fewer than that. Each chunk commits
// together with an audit_pruned entry, and the store keeps the last
// removed hash as the chain's anchor, so Verify still passes on what
// remains. An older_than in the future is taken as now: entries created
// after the prune started are never its concern. Only an unset older_than
// is missing; any valid timestamp is a bound, however far in the past
// (year 1, Go's zero time, included: it removes nothing).
//
// When a chunk fails, the chunks before it stay committed; the error says
// how many entries they removed.
func (s *Service) Prune(ctx context.Context, req *auditv1.PruneRequest) (*auditv1.PruneResponse, error) {
	if req.GetOlderThan() == nil {
		return nil, errs.InvalidArgument("older_than is required")
	}
	if err := req.GetOlderThan().CheckValid(); err != nil {
		return nil, errs.InvalidArgument("older_than: %v", err)
	}
	start := time.Now()
	older := req.GetOlderThan().AsTime()
	if older.After(start) {
		older = start
	}
	var removed int64
	for chunk := 0; ; chunk++ {
		details, _ := json.Marshal(struct {
			OlderThan string `json:"older_than"`
			Chunk     int    `json:"chunk"`
			Limit     int    `json:"limit"`
		}{older.UTC().Format(time.RFC3339Nano), chunk, s.cfg.PruneChunk})
		e, err := NewEntry(&auditv1.RecordRequest{EventType: EventAuditPruned, DetailsJson: string(details)}, time.Now())
		if err != nil {
			return nil, err
		}
		e.Principal, e.Namespace = principal.Of(ctx), persistence.DefaultNamespace
		cmd := &persistence.PruneAudit{OlderThan: older, Limit: s.cfg.PruneChunk, Audit: []*auditv1.AuditEntry{e}}
		r, err := s.w.Apply(ctx, cmd)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			if removed == 0 {
				return nil, err
			}
			e := errs.From(err)
			return nil, &errs.Error{Code: e.Code, Msg: e.Msg + "; earlier chunks of this prune removed " + strconv.FormatInt(removed, 10) + " entries"}
		}
		n := cmd.ResultOf(r).Removed
		removed += n
		if n < int64(s.cfg.PruneChunk) {
			return &auditv1.PruneResponse{Removed: removed}, nil
		}
	}
}

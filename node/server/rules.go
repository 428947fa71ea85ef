package server

import (
	"encoding/json"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/node/codec"
	"github.com/agentstate/agentstate/persistence"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
)

// defaultNamespace is the namespace of a session created without one, of
// a plan request that names none, and of audit entries that name no
// session
// (docs/OPERATIONS.md, Tenants).
const defaultNamespace = persistence.DefaultScopeNamespace

const appendMethod = sessionv1.SessionService_Append_FullMethodName

// apiRules is the rule of every method the gRPC API serves, by full method
// name. A method added to the contract without one is refused for every
// principal, and fails TestEveryServedMethodHasARule.
func apiRules() map[string]rule {
	return map[string]rule{
		// Sessions.
		sessionv1.SessionService_Create_FullMethodName: {check: checkCreate},
		sessionv1.SessionService_Get_FullMethodName:    {check: checkGet},
		sessionv1.SessionService_List_FullMethodName:   {check: checkList, filter: filterList},
		sessionv1.SessionService_Close_FullMethodName:  {check: onSession(roleWriter, func(m *sessionv1.CloseSessionRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_Delete_FullMethodName: {check: onSession(roleAdmin, func(m *sessionv1.DeleteSessionRequest) string { return m.GetSessionId() })},
		appendMethod: {perAppend: true, check: func(d *decider, msg any) error {
			m := msg.(*sessionv1.AppendRequest)
			return d.sessionWithScopes(m.GetSessionId(), roleWriter, m.GetScopeDeltas())
		}},
		sessionv1.SessionService_ListMessages_FullMethodName:     {check: onSession(roleReader, func(m *sessionv1.ListMessagesRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_UpdateTokenUsage_FullMethodName: {check: onSession(roleWriter, func(m *sessionv1.UpdateTokenUsageRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_LinkPlan_FullMethodName:         {check: onSession(roleWriter, func(m *sessionv1.LinkPlanRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_Export_FullMethodName:           {check: onSession(roleReader, func(m *sessionv1.ExportSessionRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_Import_FullMethodName: {check: func(d *decider, msg any) error {
			return d.importInto(exportNamespace(msg.(*sessionv1.ImportSessionRequest).GetData()))
		}},
		sessionv1.SessionService_AppendStream_FullMethodName:  {perAppend: true},
		sessionv1.SessionService_AppendBatches_FullMethodName: {perAppend: true},
		sessionv1.SessionService_ExportStream_FullMethodName:  {check: onSession(roleReader, func(m *sessionv1.ExportSessionRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_ImportStream_FullMethodName: {check: func(d *decider, msg any) error {
			// The header names the namespace; pages and the trailer
			// belong to the import its header opened.
			h := msg.(*sessionv1.ImportChunk).GetHeader()
			if h == nil {
				return nil
			}
			return d.importInto(h.GetSession().GetNamespace())
		}},
		sessionv1.SessionService_UpdateState_FullMethodName: {check: func(d *decider, msg any) error {
			m := msg.(*sessionv1.UpdateStateRequest)
			return d.sessionWithScopes(m.GetSessionId(), roleWriter, m.GetScopeDeltas())
		}},
		sessionv1.SessionService_GetState_FullMethodName:       {check: checkGetState},
		sessionv1.SessionService_Truncate_FullMethodName:       {check: onSession(roleAdmin, func(m *sessionv1.TruncateRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_PutSnapshot_FullMethodName:    {check: onSession(roleAdmin, func(m *sessionv1.PutSnapshotRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_GetSnapshot_FullMethodName:    {check: onSession(roleReader, func(m *sessionv1.GetSnapshotRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_DeleteSnapshot_FullMethodName: {check: onSession(roleAdmin, func(m *sessionv1.DeleteSnapshotRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_SetExpiry_FullMethodName:      {check: onSession(roleAdmin, func(m *sessionv1.SetExpiryRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_GetItem_FullMethodName:        {check: onSession(roleReader, func(m *sessionv1.GetItemRequest) string { return m.GetSessionId() })},
		sessionv1.SessionService_ListItems_FullMethodName:      {check: onSession(roleReader, func(m *sessionv1.ListItemsRequest) string { return m.GetSessionId() })},
		// A replacement writes the session as an append does (and its
		// scopes): it removes only what the writer's own appends could.
		// Scopes written without a session: writer on each scope's
		// namespace, as a session write's scope deltas are.
		sessionv1.SessionService_UpdateScopes_FullMethodName: {check: func(d *decider, msg any) error {
			return d.scopes(msg.(*sessionv1.UpdateScopesRequest).GetScopeDeltas(), roleWriter)
		}},
		// A group's delete is a namespace's: admin there, as a delete.
		sessionv1.SessionService_DeleteSessions_FullMethodName: {check: func(d *decider, msg any) error {
			return d.namespace(orDefault(msg.(*sessionv1.DeleteSessionsRequest).GetNamespace()), roleAdmin)
		}},
		// A replacement writes the session as an append does (and its
		// scopes): it removes only what the writer's own appends could.
		sessionv1.SessionService_ReplaceSuffix_FullMethodName: {check: func(d *decider, msg any) error {
			m := msg.(*sessionv1.ReplaceSuffixRequest)
			return d.sessionWithScopes(m.GetSessionId(), roleWriter, m.GetScopeDeltas())
		}},

		// Plans: a plan is (namespace, plan_id), in the namespace its
		// request names (empty: defaultNamespace).
		planv1.PlanService_RecordError_FullMethodName:       {check: onPlan(roleWriter)},
		planv1.PlanService_SetPolicy_FullMethodName:         {check: onPlan(roleWriter)},
		planv1.PlanService_RecordSuccess_FullMethodName:     {check: onPlan(roleWriter)},
		planv1.PlanService_History_FullMethodName:           {check: onPlan(roleReader)},
		planv1.PlanService_ErrorDetails_FullMethodName:      {check: onPlan(roleReader)},
		planv1.PlanService_MergeErrorDetails_FullMethodName: {check: onPlan(roleWriter)},

		// Audit: an entry belongs to its session's namespace, else to
		// defaultNamespace, and stores it (AuditEntry.namespace): reads
		// return only the entries of namespaces the principal reads
		// (auditReads).
		auditv1.AuditService_Record_FullMethodName: {check: func(d *decider, msg any) error {
			m := msg.(*auditv1.RecordRequest)
			if m.GetSessionId() != "" {
				return d.session(m.GetSessionId(), roleWriter)
			}
			return d.namespace(defaultNamespace, roleWriter)
		}},
		auditv1.AuditService_List_FullMethodName: {check: func(d *decider, msg any) error {
			m := msg.(*auditv1.ListRequest)
			if m.Filter == nil {
				m.Filter = &auditv1.Filter{}
			}
			_, err := d.auditReads(m.Filter.SessionId, &m.Filter.Namespace)
			return err
		}, filter: filterAuditList},
		auditv1.AuditService_Count_FullMethodName: {check: func(d *decider, msg any) error {
			m := msg.(*auditv1.CountRequest)
			if m.Filter == nil {
				m.Filter = &auditv1.Filter{}
			}
			all, err := d.auditReads(m.Filter.SessionId, &m.Filter.Namespace)
			if err == nil && !all {
				// A count cannot be trimmed after the fact.
				err = errs.PermissionDenied("principal %q reads several namespaces; %s needs one named (filter namespace or session_id)", d.p.Name, d.method)
			}
			return err
		}},
		auditv1.AuditService_Get_FullMethodName:    {filter: filterAuditEntry},
		auditv1.AuditService_Verify_FullMethodName: {check: func(d *decider, _ any) error { return d.operator() }},
		auditv1.AuditService_Prune_FullMethodName:  {check: func(d *decider, _ any) error { return d.operator() }},
		// Flush makes accepted entries durable: it reveals and changes
		// nothing of any namespace.
		auditv1.AuditService_Flush_FullMethodName: {},

		// Feeds.
		feedv1.FeedService_TailSession_FullMethodName: {check: onSession(roleReader, func(m *feedv1.TailSessionRequest) string { return m.GetSessionId() })},
		feedv1.FeedService_TailChanges_FullMethodName: {check: func(d *decider, msg any) error {
			m := msg.(*feedv1.TailChangesRequest)
			if m.Filter == nil {
				m.Filter = &feedv1.ChangeFilter{}
			}
			_, err := d.auditReads(m.Filter.SessionId, &m.Filter.Namespace)
			return err
		}, keep: keepChange},

		// Health and reflection reveal nothing of any namespace: any
		// authenticated principal.
		healthpb.Health_Check_FullMethodName:                                   {},
		healthpb.Health_List_FullMethodName:                                    {},
		healthpb.Health_Watch_FullMethodName:                                   {},
		reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName:      {},
		reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName: {},
	}
}

// onSession is the rule of a request naming one session by id.
func onSession[M any](need role, id func(*M) string) func(*decider, any) error {
	return func(d *decider, msg any) error { return d.session(id(msg.(*M)), need) }
}

// onPlan is the rule of a plan request: need on the plan's namespace. A
// principal that cannot read that namespace finds no plan there: NOT_FOUND,
// as for a plan nothing was recorded for, whether or not the namespace
// has plans.
func onPlan(need role) func(*decider, any) error {
	return func(d *decider, msg any) error {
		m := msg.(planRequest)
		return d.entity(orDefault(m.GetNamespace()), need, func() error { return errs.NotFound("plan %s not found", m.GetPlanId()) })
	}
}

// planRequest is what every plan request names: its plan.
type planRequest interface {
	GetNamespace() string
	GetPlanId() string
}

func orDefault(ns string) string {
	if ns == "" {
		return defaultNamespace
	}
	return ns
}

func checkCreate(d *decider, msg any) error {
	m := msg.(*sessionv1.CreateSessionRequest)
	ns := orDefault(m.GetNamespace())
	need := roleWriter
	if m.GetExpiresAt() != nil || m.GetTtl() != nil {
		need = roleAdmin // a time-to-live is a deletion to come
	}
	if err := d.namespace(ns, need); err != nil {
		return err
	}
	return d.scopes(m.GetScopeDeltas(), roleWriter)
}

func checkGet(d *decider, msg any) error {
	m := msg.(*sessionv1.GetSessionRequest)
	if m.GetSessionId() != "" {
		return d.session(m.GetSessionId(), roleReader)
	}
	ns := orDefault(m.GetNamespace())
	return d.entity(ns, roleReader, func() error {
		return errs.NotFound("no session has client key %q in namespace %q", m.GetClientKey(), ns)
	})
}

// checkList narrows a list to the one namespace a principal reads when its
// grants name just one, so the store's page is all the principal's.
func checkList(d *decider, msg any) error {
	m := msg.(*sessionv1.ListSessionsRequest)
	if ns, ok := d.p.only(); ok && m.GetNamespace() == "" {
		m.Namespace = ns
	}
	return nil
}

// filterList drops the sessions the principal cannot read. A page may then
// hold fewer than its limit, or none, with a next_cursor: page on until
// next_cursor is empty, as the contract says.
func filterList(d *decider, resp any) (any, error) {
	r := resp.(*sessionv1.ListSessionsResponse)
	if d.p.everywhere >= roleReader {
		return r, nil
	}
	kept := r.Sessions[:0]
	for _, s := range r.Sessions {
		if d.p.role(s.GetNamespace()) >= roleReader {
			kept = append(kept, s)
		}
	}
	r.Sessions = kept
	return r, nil
}

func checkGetState(d *decider, msg any) error {
	m := msg.(*sessionv1.GetStateRequest)
	if err := d.session(m.GetSessionId(), roleReader); err != nil {
		return err
	}
	for _, sc := range m.GetScopes() {
		if err := d.namespace(persistence.ScopeNamespace(sc), roleReader); err != nil {
			return err
		}
	}
	return nil
}

// sessionWithScopes decides a write to a session and to the shared scopes
// it changes.
func (d *decider) sessionWithScopes(id string, need role, scopes []*sessionv1.ScopeDelta) error {
	if err := d.session(id, need); err != nil {
		return err
	}
	return d.scopes(scopes, roleWriter)
}

func (d *decider) scopes(scopes []*sessionv1.ScopeDelta, need role) error {
	if d.p.everywhere >= need {
		return nil
	}
	for _, sc := range scopes {
		if err := d.namespace(persistence.ScopeNamespace(sc.GetScope()), need); err != nil {
			return err
		}
	}
	return nil
}

// importInto decides an import into namespace ns: a writer of it, or the
// operator (who may import into any namespace).
func (d *decider) importInto(ns string) error {
	if d.p.operator {
		return nil
	}
	return d.namespace(orDefault(ns), roleWriter)
}

// exportNamespace is the namespace an export's data names; "" when the
// data is not an export (the import refuses it INVALID_ARGUMENT).
func exportNamespace(data string) string {
	var doc struct {
		Session struct {
			Namespace string `json:"namespace"`
		} `json:"session"`
	}
	if json.Unmarshal([]byte(data), &doc) != nil {
		return ""
	}
	return doc.Session.Namespace
}

// auditReads decides a read of the audit trail (list, count, change feed)
// and narrows it to what the principal reads. all reports that the
// request, as narrowed, selects only entries the principal may read; when
// it does not (a principal of several namespaces naming none), the
// answer must be trimmed entry by entry (readsEntry).
//
// The operator and a reader of every namespace read everything. Otherwise:
// one session's entries for a reader of its namespace; one namespace's for
// a reader of it (namespace is stored with every entry and indexed, so the
// store selects them); with neither named, the one namespace a principal
// holds a grant on is named for it.
func (d *decider) auditReads(sessionID string, namespace *string) (all bool, err error) {
	if d.p.operator || d.p.everywhere >= roleReader {
		return true, nil
	}
	if sessionID != "" {
		// A session's entries are all of its namespace.
		return true, d.session(sessionID, roleReader)
	}
	if *namespace != "" {
		return true, d.namespace(*namespace, roleReader)
	}
	if ns, ok := d.p.only(); ok {
		if err := d.namespace(ns, roleReader); err != nil {
			return false, err
		}
		*namespace = ns
		return true, nil
	}
	return false, nil
}

// readsEntry reports whether the principal may read e: its stored
// namespace (entries older than principals were given their session's at
// the migration, else the default one).
func (d *decider) readsEntry(e *auditv1.AuditEntry) bool {
	if d.p.operator || d.p.everywhere >= roleReader {
		return true
	}
	return d.p.role(orDefault(e.GetNamespace())) >= roleReader
}

// filterAuditEntry hides an entry of a namespace the principal cannot read
// as a missing one.
func filterAuditEntry(d *decider, resp any) (any, error) {
	e := resp.(*auditv1.GetResponse).GetEntry()
	if !d.readsEntry(e) {
		return nil, errs.NotFound("audit entry %s not found", e.GetEventId())
	}
	return resp, nil
}

// filterAuditList drops the entries the principal cannot read (a list that
// auditReads could not narrow to them). A page may then hold fewer than
// its limit, or none, with a next_cursor: page on until it is empty.
func filterAuditList(d *decider, resp any) (any, error) {
	r := resp.(*auditv1.ListResponse)
	kept := r.Entries[:0]
	for _, e := range r.Entries {
		if d.readsEntry(e) {
			kept = append(kept, e)
		}
	}
	r.Entries = kept
	return r, nil
}

// keepChange drops, from a change feed, the entries the principal cannot
// read; the feed's other events (pruned ranges, its end) reveal no entry.
func keepChange(d *decider, msg any) bool {
	if t, ok := msg.(*codec.Tracked); ok {
		// The feed stream's envelope (a dropped one is released unsent).
		msg = t.Message
	}
	ev, ok := msg.(*feedv1.ChangeEvent)
	return !ok || ev.GetEntry() == nil || d.readsEntry(ev.GetEntry())
}

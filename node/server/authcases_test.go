package server

import (
	"context"
	"fmt"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// callEnv is one matrix call: ctx carries the principal's credential; f
// is the target namespace's fixture.
type callEnv struct {
	ctx context.Context
	n   *authNode
	f   *fixture
	p   testPrincipal
}

func (e *callEnv) scopes() []*sessionv1.ScopeDelta {
	return []*sessionv1.ScopeDelta{{Scope: e.f.scope, Delta: &sessionv1.StateDelta{SetJson: map[string]string{"y": "2"}}}}
}

func ok[T any](_ T, err error) error { return err }

// firstOf is the outcome of a server stream's first message: a served
// stream delivers one (the tails catch up from the fixture).
func firstOf[T any](st interface{ Recv() (T, error) }, err error) error {
	if err != nil {
		return err
	}
	_, err = st.Recv()
	return err
}

// matrixCases calls every served method with a request that succeeds when
// authorized; need, orOperator and hide state the role model.
func matrixCases() map[string]matrixCase {
	s, p, a := sessionCase, planCase, func(c matrixCase) matrixCase { return c }
	return map[string]matrixCase{
		sessionv1.SessionService_Create_FullMethodName: {need: needWriter, call: func(e *callEnv) error {
			return ok(e.n.ss.Create(e.ctx, &sessionv1.CreateSessionRequest{Namespace: e.f.ns, ActorName: "m", ScopeDeltas: e.scopes()}))
		}},
		sessionv1.SessionService_Get_FullMethodName: s(needReader, func(e *callEnv) error {
			return ok(e.n.ss.Get(e.ctx, &sessionv1.GetSessionRequest{SessionId: e.f.session}))
		}),
		sessionv1.SessionService_List_FullMethodName: {need: needAny, call: listReadable},
		sessionv1.SessionService_Close_FullMethodName: s(needWriter, func(e *callEnv) error {
			return ok(e.n.ss.Close(e.ctx, &sessionv1.CloseSessionRequest{SessionId: e.f.session}))
		}),
		sessionv1.SessionService_Delete_FullMethodName: s(needAdmin, func(e *callEnv) error {
			return ok(e.n.ss.Delete(e.ctx, &sessionv1.DeleteSessionRequest{SessionId: e.f.session}))
		}),
		sessionv1.SessionService_Append_FullMethodName: s(needWriter, func(e *callEnv) error {
			return ok(e.n.ss.Append(e.ctx, e.appendReq()))
		}),
		sessionv1.SessionService_ListMessages_FullMethodName: s(needReader, func(e *callEnv) error {
			return ok(e.n.ss.ListMessages(e.ctx, &sessionv1.ListMessagesRequest{SessionId: e.f.session}))
		}),
		sessionv1.SessionService_UpdateTokenUsage_FullMethodName: s(needWriter, func(e *callEnv) error {
			return ok(e.n.ss.UpdateTokenUsage(e.ctx, &sessionv1.UpdateTokenUsageRequest{SessionId: e.f.session, InputTokens: 1}))
		}),
		sessionv1.SessionService_LinkPlan_FullMethodName: s(needWriter, func(e *callEnv) error {
			return ok(e.n.ss.LinkPlan(e.ctx, &sessionv1.LinkPlanRequest{SessionId: e.f.session, Plan: &sessionv1.LinkedPlan{PlanId: e.f.plan, Phase: "execute"}}))
		}),
		sessionv1.SessionService_Export_FullMethodName: s(needReader, func(e *callEnv) error {
			return ok(e.n.ss.Export(e.ctx, &sessionv1.ExportSessionRequest{SessionId: e.f.session}))
		}),
		sessionv1.SessionService_Import_FullMethodName: {need: needWriter, orOperator: true, call: func(e *callEnv) error {
			return ok(e.n.ss.Import(e.ctx, &sessionv1.ImportSessionRequest{Data: e.f.export}))
		}},
		sessionv1.SessionService_AppendStream_FullMethodName:  s(needWriter, appendStream),
		sessionv1.SessionService_AppendBatches_FullMethodName: s(needWriter, appendBatches),
		sessionv1.SessionService_ExportStream_FullMethodName: s(needReader, func(e *callEnv) error {
			return firstOf(e.n.ss.ExportStream(e.ctx, &sessionv1.ExportSessionRequest{SessionId: e.f.session}))
		}),
		sessionv1.SessionService_ImportStream_FullMethodName: {need: needWriter, orOperator: true, call: importStream},
		sessionv1.SessionService_UpdateState_FullMethodName: s(needWriter, func(e *callEnv) error {
			return ok(e.n.ss.UpdateState(e.ctx, &sessionv1.UpdateStateRequest{SessionId: e.f.session,
				StateDelta: &sessionv1.StateDelta{SetJson: map[string]string{"k": "2"}}, ScopeDeltas: e.scopes()}))
		}),
		sessionv1.SessionService_GetState_FullMethodName: s(needReader, func(e *callEnv) error {
			return ok(e.n.ss.GetState(e.ctx, &sessionv1.GetStateRequest{SessionId: e.f.session, Scopes: []string{e.f.scope}}))
		}),
		sessionv1.SessionService_Truncate_FullMethodName: s(needAdmin, func(e *callEnv) error {
			return ok(e.n.ss.Truncate(e.ctx, &sessionv1.TruncateRequest{SessionId: e.f.session, ThroughSequence: 0}))
		}),
		sessionv1.SessionService_PutSnapshot_FullMethodName: s(needAdmin, func(e *callEnv) error {
			return ok(e.n.ss.PutSnapshot(e.ctx, &sessionv1.PutSnapshotRequest{SessionId: e.f.session, Sequence: 1, Data: []byte("s2")}))
		}),
		sessionv1.SessionService_GetSnapshot_FullMethodName: s(needReader, func(e *callEnv) error {
			return ok(e.n.ss.GetSnapshot(e.ctx, &sessionv1.GetSnapshotRequest{SessionId: e.f.session}))
		}),
		sessionv1.SessionService_DeleteSnapshot_FullMethodName: s(needAdmin, func(e *callEnv) error {
			return ok(e.n.ss.DeleteSnapshot(e.ctx, &sessionv1.DeleteSnapshotRequest{SessionId: e.f.session, ThroughSequence: 5}))
		}),
		sessionv1.SessionService_GetItem_FullMethodName: s(needReader, func(e *callEnv) error {
			return ok(e.n.ss.GetItem(e.ctx, &sessionv1.GetItemRequest{SessionId: e.f.session, ItemKey: "item"}))
		}),
		sessionv1.SessionService_ListItems_FullMethodName: s(needReader, func(e *callEnv) error {
			return ok(e.n.ss.ListItems(e.ctx, &sessionv1.ListItemsRequest{SessionId: e.f.session, Kind: "k"}))
		}),
		sessionv1.SessionService_SetExpiry_FullMethodName: s(needAdmin, func(e *callEnv) error {
			return ok(e.n.ss.SetExpiry(e.ctx, &sessionv1.SetExpiryRequest{SessionId: e.f.session, Ttl: durationpb.New(time.Hour)}))
		}),
		sessionv1.SessionService_UpdateScopes_FullMethodName: {need: needWriter, call: func(e *callEnv) error {
			return ok(e.n.ss.UpdateScopes(e.ctx, &sessionv1.UpdateScopesRequest{ScopeDeltas: e.scopes()}))
		}},
		sessionv1.SessionService_DeleteSessions_FullMethodName: {need: needAdmin, call: func(e *callEnv) error {
			return ok(e.n.ss.DeleteSessions(e.ctx, &sessionv1.DeleteSessionsRequest{Namespace: e.f.ns, ClientKeyPrefix: "no-such-thread/"}))
		}},
		sessionv1.SessionService_ReplaceSuffix_FullMethodName: s(needWriter, func(e *callEnv) error {
			// The expectation is read as root: the call is decided on
			// the replacement alone.
			got, err := e.n.ss.Get(as(context.Background(), rootPrincipal), &sessionv1.GetSessionRequest{SessionId: e.f.session})
			if err != nil {
				return fmt.Errorf("reading the fixture: %w", err)
			}
			next := got.GetSession().GetMessageCount()
			return ok(e.n.ss.ReplaceSuffix(e.ctx, &sessionv1.ReplaceSuffixRequest{SessionId: e.f.session,
				From: &sessionv1.ReplaceSuffixRequest_RemoveLast{RemoveLast: 0}, ExpectedNextSequence: &next,
				Messages: []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "replaced"}}, ScopeDeltas: e.scopes()}))
		}),

		planv1.PlanService_RecordError_FullMethodName: p(needWriter, func(e *callEnv) error {
			return ok(e.n.pl.RecordError(e.ctx, &planv1.RecordErrorRequest{Namespace: e.f.ns, PlanId: e.f.plan, Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s", ErrorType: "TimeoutError", Message: "again"}))
		}),
		planv1.PlanService_SetPolicy_FullMethodName: p(needWriter, func(e *callEnv) error {
			return ok(e.n.pl.SetPolicy(e.ctx, &planv1.SetPolicyRequest{Namespace: e.f.ns, PlanId: e.f.plan, MaxRetries: 7}))
		}),
		planv1.PlanService_RecordSuccess_FullMethodName: p(needWriter, func(e *callEnv) error {
			return ok(e.n.pl.RecordSuccess(e.ctx, &planv1.RecordSuccessRequest{Namespace: e.f.ns, PlanId: e.f.plan, Phase: planv1.Phase_PHASE_EXECUTE, StepId: "s"}))
		}),
		planv1.PlanService_History_FullMethodName: p(needReader, func(e *callEnv) error {
			return ok(e.n.pl.History(e.ctx, &planv1.HistoryRequest{Namespace: e.f.ns, PlanId: e.f.plan}))
		}),
		planv1.PlanService_ErrorDetails_FullMethodName: p(needReader, func(e *callEnv) error {
			return ok(e.n.pl.ErrorDetails(e.ctx, &planv1.ErrorDetailsRequest{Namespace: e.f.ns, PlanId: e.f.plan}))
		}),
		planv1.PlanService_MergeErrorDetails_FullMethodName: p(needWriter, func(e *callEnv) error {
			return ok(e.n.pl.MergeErrorDetails(e.ctx, &planv1.MergeErrorDetailsRequest{Namespace: e.f.ns, PlanId: e.f.plan, DetailsJson: `{"note":"x"}`}))
		}),

		auditv1.AuditService_Record_FullMethodName: s(needWriter, func(e *callEnv) error {
			return ok(e.n.au.Record(e.ctx, &auditv1.RecordRequest{EventType: "resource_modified", SessionId: e.f.session, Sync: true}))
		}),
		auditv1.AuditService_List_FullMethodName: a(matrixCase{need: needReader, orOperator: true, hide: true, call: func(e *callEnv) error {
			return ok(e.n.au.List(e.ctx, &auditv1.ListRequest{Filter: &auditv1.Filter{SessionId: e.f.session}}))
		}}),
		auditv1.AuditService_Count_FullMethodName: a(matrixCase{need: needReader, orOperator: true, hide: true, call: func(e *callEnv) error {
			return ok(e.n.au.Count(e.ctx, &auditv1.CountRequest{Filter: &auditv1.Filter{SessionId: e.f.session}}))
		}}),
		auditv1.AuditService_Get_FullMethodName: a(matrixCase{need: needReader, orOperator: true, hide: true, call: func(e *callEnv) error {
			return ok(e.n.au.Get(e.ctx, &auditv1.GetRequest{EventId: e.f.auditID}))
		}}),
		auditv1.AuditService_Verify_FullMethodName: {need: needOperator, call: func(e *callEnv) error {
			return ok(e.n.au.Verify(e.ctx, &auditv1.VerifyRequest{}))
		}},
		auditv1.AuditService_Prune_FullMethodName: {need: needOperator, call: func(e *callEnv) error {
			return ok(e.n.au.Prune(e.ctx, &auditv1.PruneRequest{OlderThan: timestamppb.New(time.Now().Add(time.Hour))}))
		}},
		auditv1.AuditService_Flush_FullMethodName: {need: needAny, call: func(e *callEnv) error {
			return ok(e.n.au.Flush(e.ctx, &auditv1.FlushRequest{}))
		}},

		feedv1.FeedService_TailSession_FullMethodName: s(needReader, func(e *callEnv) error {
			return firstOf(feedv1.NewFeedServiceClient(e.n.conn).TailSession(e.ctx, &feedv1.TailSessionRequest{SessionId: e.f.session}))
		}),
		feedv1.FeedService_TailChanges_FullMethodName: a(matrixCase{need: needReader, orOperator: true, hide: true, call: func(e *callEnv) error {
			return firstOf(feedv1.NewFeedServiceClient(e.n.conn).TailChanges(e.ctx, &feedv1.TailChangesRequest{Filter: &feedv1.ChangeFilter{SessionId: e.f.session}}))
		}}),

		healthpb.Health_Check_FullMethodName: {need: needAny, call: func(e *callEnv) error {
			return ok(healthpb.NewHealthClient(e.n.conn).Check(e.ctx, &healthpb.HealthCheckRequest{}))
		}},
		healthpb.Health_List_FullMethodName: {need: needAny, call: func(e *callEnv) error {
			return ok(healthpb.NewHealthClient(e.n.conn).List(e.ctx, &healthpb.HealthListRequest{}))
		}},
		healthpb.Health_Watch_FullMethodName: {need: needAny, call: func(e *callEnv) error {
			return firstOf(healthpb.NewHealthClient(e.n.conn).Watch(e.ctx, &healthpb.HealthCheckRequest{}))
		}},
		reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName: {need: needAny, call: func(e *callEnv) error {
			st, err := reflectionv1.NewServerReflectionClient(e.n.conn).ServerReflectionInfo(e.ctx)
			if err != nil {
				return err
			}
			_ = st.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}) // a refused stream: Recv says why
			return firstOf(st, nil)
		}},
		reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName: {need: needAny, call: func(e *callEnv) error {
			st, err := reflectionv1alpha.NewServerReflectionClient(e.n.conn).ServerReflectionInfo(e.ctx)
			if err != nil {
				return err
			}
			//lint:ignore SA1019 the node still serves v1alpha reflection (grpcurl's older clients use it), so its rule is tested
			_ = st.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}) // a refused stream: Recv says why
			return firstOf(st, nil)
		}},
	}
}

func sessionCase(n need, call func(*callEnv) error) matrixCase {
	return matrixCase{need: n, hide: true, call: call}
}

func planCase(n need, call func(*callEnv) error) matrixCase {
	return matrixCase{need: n, hide: true, call: call}
}

func (e *callEnv) appendReq() *sessionv1.AppendRequest {
	return &sessionv1.AppendRequest{SessionId: e.f.session,
		Messages:    []*sessionv1.NewMessage{{Role: sessionv1.Role_ROLE_USER, Content: "more"}},
		ScopeDeltas: e.scopes()}
}

// listReadable lists every session: it is served to every principal, and
// holds only sessions of namespaces the principal reads, the fixture's
// among them when it reads its namespace.
func listReadable(e *callEnv) error {
	seen := false
	for cursor := ""; ; {
		r, err := e.n.ss.List(e.ctx, &sessionv1.ListSessionsRequest{Cursor: cursor, Limit: 1000})
		if err != nil {
			return err
		}
		for _, s := range r.GetSessions() {
			if e.p.roles[s.GetNamespace()] < roleReader {
				return fmt.Errorf("the list shows session %s of namespace %q", s.GetSessionId(), s.GetNamespace())
			}
			seen = seen || s.GetSessionId() == e.f.session
		}
		if cursor = r.GetNextCursor(); cursor == "" {
			break
		}
	}
	if !seen && e.p.roles[e.f.ns] >= roleReader {
		return fmt.Errorf("the list misses the fixture's session %s", e.f.session)
	}
	return nil
}

func appendStream(e *callEnv) error {
	st, err := e.n.ss.AppendStream(e.ctx)
	if err != nil {
		return err
	}
	_ = st.Send(e.appendReq()) // a refused stream: Recv says why
	out, err := st.Recv()
	if err != nil {
		return err
	}
	st.CloseSend()
	return errs.FromProto(out.GetError())
}

func appendBatches(e *callEnv) error {
	st, err := e.n.ss.AppendBatches(e.ctx)
	if err != nil {
		return err
	}
	_ = st.Send(&sessionv1.AppendBatch{Appends: []*sessionv1.TaggedAppend{{Tag: 1, Request: e.appendReq()}}}) // a refused stream: Recv says why
	out, err := st.Recv()
	if err != nil {
		return err
	}
	st.CloseSend()
	return errs.FromProto(out.GetOutcomes()[0].GetOutcome().GetError())
}

func importStream(e *callEnv) error {
	st, err := e.n.ss.ImportStream(e.ctx)
	if err != nil {
		return err
	}
	for _, c := range e.f.chunks {
		var ic sessionv1.ImportChunk
		switch p := c.GetPart().(type) {
		case *sessionv1.ExportChunk_Header:
			ic.Part = &sessionv1.ImportChunk_Header{Header: p.Header}
		case *sessionv1.ExportChunk_Page:
			ic.Part = &sessionv1.ImportChunk_Page{Page: p.Page}
		case *sessionv1.ExportChunk_Trailer:
			ic.Part = &sessionv1.ImportChunk_Trailer{Trailer: p.Trailer}
		}
		if err := st.Send(&ic); err != nil {
			break // the node ended the stream: CloseAndRecv says why
		}
	}
	return ok(st.CloseAndRecv())
}

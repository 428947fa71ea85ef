package server

// The embedded API's methods, each decided by its gRPC method's rule when
// its context carries a principal (embedded.go).

import (
	"context"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

func (s guardedSessions) Create(ctx context.Context, req *sessionv1.CreateSessionRequest) (*sessionv1.CreateSessionResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_Create_FullMethodName, req, s.inner.Create)
}

func (s guardedSessions) Get(ctx context.Context, req *sessionv1.GetSessionRequest) (*sessionv1.GetSessionResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_Get_FullMethodName, req, s.inner.Get)
}

func (s guardedSessions) List(ctx context.Context, req *sessionv1.ListSessionsRequest) (*sessionv1.ListSessionsResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_List_FullMethodName, req, s.inner.List)
}

func (s guardedSessions) Close(ctx context.Context, req *sessionv1.CloseSessionRequest) (*sessionv1.CloseSessionResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_Close_FullMethodName, req, s.inner.Close)
}

func (s guardedSessions) Delete(ctx context.Context, req *sessionv1.DeleteSessionRequest) (*sessionv1.DeleteSessionResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_Delete_FullMethodName, req, s.inner.Delete)
}

func (s guardedSessions) ListMessages(ctx context.Context, req *sessionv1.ListMessagesRequest) (*sessionv1.ListMessagesResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_ListMessages_FullMethodName, req, s.inner.ListMessages)
}

func (s guardedSessions) UpdateTokenUsage(ctx context.Context, req *sessionv1.UpdateTokenUsageRequest) (*sessionv1.UpdateTokenUsageResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_UpdateTokenUsage_FullMethodName, req, s.inner.UpdateTokenUsage)
}

func (s guardedSessions) LinkPlan(ctx context.Context, req *sessionv1.LinkPlanRequest) (*sessionv1.LinkPlanResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_LinkPlan_FullMethodName, req, s.inner.LinkPlan)
}

func (s guardedSessions) Export(ctx context.Context, req *sessionv1.ExportSessionRequest) (*sessionv1.ExportSessionResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_Export_FullMethodName, req, s.inner.Export)
}

func (s guardedSessions) Import(ctx context.Context, req *sessionv1.ImportSessionRequest) (*sessionv1.ImportSessionResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_Import_FullMethodName, req, s.inner.Import)
}

func (s guardedSessions) UpdateState(ctx context.Context, req *sessionv1.UpdateStateRequest) (*sessionv1.UpdateStateResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_UpdateState_FullMethodName, req, s.inner.UpdateState)
}

func (s guardedSessions) GetState(ctx context.Context, req *sessionv1.GetStateRequest) (*sessionv1.GetStateResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_GetState_FullMethodName, req, s.inner.GetState)
}

func (s guardedSessions) Truncate(ctx context.Context, req *sessionv1.TruncateRequest) (*sessionv1.TruncateResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_Truncate_FullMethodName, req, s.inner.Truncate)
}

func (s guardedSessions) PutSnapshot(ctx context.Context, req *sessionv1.PutSnapshotRequest) (*sessionv1.PutSnapshotResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_PutSnapshot_FullMethodName, req, s.inner.PutSnapshot)
}

func (s guardedSessions) GetSnapshot(ctx context.Context, req *sessionv1.GetSnapshotRequest) (*sessionv1.GetSnapshotResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_GetSnapshot_FullMethodName, req, s.inner.GetSnapshot)
}

func (s guardedSessions) DeleteSnapshot(ctx context.Context, req *sessionv1.DeleteSnapshotRequest) (*sessionv1.DeleteSnapshotResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_DeleteSnapshot_FullMethodName, req, s.inner.DeleteSnapshot)
}

func (s guardedSessions) SetExpiry(ctx context.Context, req *sessionv1.SetExpiryRequest) (*sessionv1.SetExpiryResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_SetExpiry_FullMethodName, req, s.inner.SetExpiry)
}

func (s guardedSessions) GetItem(ctx context.Context, req *sessionv1.GetItemRequest) (*sessionv1.GetItemResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_GetItem_FullMethodName, req, s.inner.GetItem)
}

func (s guardedSessions) ListItems(ctx context.Context, req *sessionv1.ListItemsRequest) (*sessionv1.ListItemsResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_ListItems_FullMethodName, req, s.inner.ListItems)
}

func (s guardedSessions) ReplaceSuffix(ctx context.Context, req *sessionv1.ReplaceSuffixRequest) (*sessionv1.ReplaceSuffixResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_ReplaceSuffix_FullMethodName, req, s.inner.ReplaceSuffix)
}

func (s guardedSessions) DeleteSessions(ctx context.Context, req *sessionv1.DeleteSessionsRequest) (*sessionv1.DeleteSessionsResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_DeleteSessions_FullMethodName, req, s.inner.DeleteSessions)
}

func (s guardedSessions) UpdateScopes(ctx context.Context, req *sessionv1.UpdateScopesRequest) (*sessionv1.UpdateScopesResponse, error) {
	return guarded(s.z, ctx, sessionv1.SessionService_UpdateScopes_FullMethodName, req, s.inner.UpdateScopes)
}

func (p guardedPlans) RecordError(ctx context.Context, req *planv1.RecordErrorRequest) (*planv1.RecordErrorResponse, error) {
	return guarded(p.z, ctx, planv1.PlanService_RecordError_FullMethodName, req, p.inner.RecordError)
}

func (p guardedPlans) SetPolicy(ctx context.Context, req *planv1.SetPolicyRequest) (*planv1.SetPolicyResponse, error) {
	return guarded(p.z, ctx, planv1.PlanService_SetPolicy_FullMethodName, req, p.inner.SetPolicy)
}

func (p guardedPlans) RecordSuccess(ctx context.Context, req *planv1.RecordSuccessRequest) (*planv1.RecordSuccessResponse, error) {
	return guarded(p.z, ctx, planv1.PlanService_RecordSuccess_FullMethodName, req, p.inner.RecordSuccess)
}

func (p guardedPlans) History(ctx context.Context, req *planv1.HistoryRequest) (*planv1.HistoryResponse, error) {
	return guarded(p.z, ctx, planv1.PlanService_History_FullMethodName, req, p.inner.History)
}

func (p guardedPlans) ErrorDetails(ctx context.Context, req *planv1.ErrorDetailsRequest) (*planv1.ErrorDetailsResponse, error) {
	return guarded(p.z, ctx, planv1.PlanService_ErrorDetails_FullMethodName, req, p.inner.ErrorDetails)
}

func (p guardedPlans) MergeErrorDetails(ctx context.Context, req *planv1.MergeErrorDetailsRequest) (*planv1.MergeErrorDetailsResponse, error) {
	return guarded(p.z, ctx, planv1.PlanService_MergeErrorDetails_FullMethodName, req, p.inner.MergeErrorDetails)
}

func (a guardedAudit) Record(ctx context.Context, req *auditv1.RecordRequest) (*auditv1.RecordResponse, error) {
	return guarded(a.z, ctx, auditv1.AuditService_Record_FullMethodName, req, a.inner.Record)
}

func (a guardedAudit) List(ctx context.Context, req *auditv1.ListRequest) (*auditv1.ListResponse, error) {
	return guarded(a.z, ctx, auditv1.AuditService_List_FullMethodName, req, a.inner.List)
}

func (a guardedAudit) Count(ctx context.Context, req *auditv1.CountRequest) (*auditv1.CountResponse, error) {
	return guarded(a.z, ctx, auditv1.AuditService_Count_FullMethodName, req, a.inner.Count)
}

func (a guardedAudit) Get(ctx context.Context, req *auditv1.GetRequest) (*auditv1.GetResponse, error) {
	return guarded(a.z, ctx, auditv1.AuditService_Get_FullMethodName, req, a.inner.Get)
}

func (a guardedAudit) Verify(ctx context.Context, req *auditv1.VerifyRequest) (*auditv1.VerifyResponse, error) {
	return guarded(a.z, ctx, auditv1.AuditService_Verify_FullMethodName, req, a.inner.Verify)
}

func (a guardedAudit) Prune(ctx context.Context, req *auditv1.PruneRequest) (*auditv1.PruneResponse, error) {
	return guarded(a.z, ctx, auditv1.AuditService_Prune_FullMethodName, req, a.inner.Prune)
}

func (a guardedAudit) Flush(ctx context.Context, req *auditv1.FlushRequest) (*auditv1.FlushResponse, error) {
	return guarded(a.z, ctx, auditv1.AuditService_Flush_FullMethodName, req, a.inner.Flush)
}

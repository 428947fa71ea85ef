package main

import (
	"context"
	"fmt"
	"strings"

	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
)

func newPlanCommand() *cobra.Command {
	o := &clientOptions{}
	c := &cobra.Command{Use: "plan", Short: "Plans: error history, retry accounting and recovery advice"}
	o.register(c)
	c.AddCommand(planRecordErrorCmd(o), planHistoryCmd(o), planDetailsCmd(o), planPolicyCmd(o),
		planRecordSuccessCmd(o), planMergeDetailsCmd(o))
	return c
}

// planFlags are the flags naming the plan: a plan is (namespace, plan id),
// so the same --plan in another --namespace is another plan.
func planFlags(c *cobra.Command, planID, namespace *string) {
	c.Flags().StringVar(planID, "plan", "", "plan id (required)")
	c.Flags().StringVar(namespace, "namespace", "", `the plan's namespace (default "local")`)
}

// planCall is the RunE of a plan command that makes one call: the
// required flags checked, then parse (when not nil) turning the other
// flags into the request, whose error is a usage error, then rpc.
func planCall(o *clientOptions, required []string, parse func() error,
	rpc func(context.Context, planv1.PlanServiceClient) (proto.Message, error)) func(*cobra.Command, []string) error {
	return withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, required...); err != nil {
			return err
		}
		if parse != nil {
			if err := parse(); err != nil {
				return usagef(cmd, "%v", err)
			}
		}
		api := planv1.NewPlanServiceClient(cl.conn)
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) { return rpc(ctx, api) })
	})
}

func planRecordErrorCmd(o *clientOptions) *cobra.Command {
	req := &planv1.RecordErrorRequest{}
	var phase string
	c := &cobra.Command{Use: "record-error", Short: "Record an error of a plan step; prints the record with its recovery advice"}
	planFlags(c, &req.PlanId, &req.Namespace)
	c.Flags().StringVar(&phase, "phase", "", "phase: action, strategize, execute or apply (required)")
	c.Flags().StringVar(&req.StepId, "step", "", "step id")
	c.Flags().StringVar(&req.ErrorType, "type", "", "error type, e.g. TimeoutError (required)")
	c.Flags().StringVar(&req.Message, "message", "", "error message")
	c.Flags().StringVar(&req.Tool, "tool", "", "tool that failed")
	c.Flags().StringVar(&req.ActorName, "actor", "", "actor that hit the error")
	c.Flags().StringVar(&req.StackSummary, "stack", "", "stack summary")
	c.Flags().StringVar(&req.AttributesJson, "attributes", "", "attributes, a JSON object")
	c.Flags().StringVar(&req.RecordId, "record-id", "", "client-chosen record id (a ULID) that makes a retry idempotent: "+
		"a retry prints the stored record with duplicate: true")
	c.RunE = planCall(o, []string{"plan", "phase", "type"}, func() (err error) {
		req.Phase, err = parsePhase(phase)
		return err
	}, func(ctx context.Context, api planv1.PlanServiceClient) (proto.Message, error) {
		return api.RecordError(ctx, req)
	})
	return c
}

func planHistoryCmd(o *clientOptions) *cobra.Command {
	req := &planv1.HistoryRequest{}
	var phase, category string
	var all bool
	c := &cobra.Command{Use: "history", Short: "List a plan's error records in sequence order, one page per line"}
	planFlags(c, &req.PlanId, &req.Namespace)
	c.Flags().StringVar(&phase, "phase", "", "only this phase")
	c.Flags().StringVar(&category, "category", "", "only this category, e.g. transient, auth, validation")
	c.Flags().Int64Var(&req.FromSequence, "from", 0, "first sequence to list")
	c.Flags().Int32Var(&req.Limit, "limit", 0, "page size (default 100, at most 1000)")
	c.Flags().BoolVar(&all, "all", false, "fetch every page")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "plan"); err != nil {
			return err
		}
		var err error
		if phase != "" {
			if req.Phase, err = parsePhase(phase); err != nil {
				return usagef(cmd, "%v", err)
			}
		}
		if category != "" {
			if req.Category, err = parseCategory(category); err != nil {
				return usagef(cmd, "%v", err)
			}
		}
		api := planv1.NewPlanServiceClient(cl.conn)
		return pages(cmd, cl, all,
			func(ctx context.Context) (*planv1.HistoryResponse, error) { return api.History(ctx, req) },
			func(r *planv1.HistoryResponse) bool {
				if r.GetNextSequence() < 0 || r.GetNextSequence() <= req.FromSequence {
					return false
				}
				req.FromSequence = r.GetNextSequence()
				return true
			})
	})
	return c
}

func planDetailsCmd(o *clientOptions) *cobra.Command {
	req := &planv1.ErrorDetailsRequest{}
	c := &cobra.Command{Use: "details", Short: "Show a plan's error details, recovery summary and retry policy"}
	planFlags(c, &req.PlanId, &req.Namespace)
	c.RunE = planCall(o, []string{"plan"}, nil, func(ctx context.Context, api planv1.PlanServiceClient) (proto.Message, error) {
		return api.ErrorDetails(ctx, req)
	})
	return c
}

func planPolicyCmd(o *clientOptions) *cobra.Command {
	req := &planv1.SetPolicyRequest{}
	c := &cobra.Command{Use: "policy", Short: "Set a plan's retry policy"}
	planFlags(c, &req.PlanId, &req.Namespace)
	c.Flags().Int32Var(&req.MaxRetries, "max-retries", 0, "retries allowed per step, 0..100 (required)")
	c.RunE = planCall(o, []string{"plan", "max-retries"}, nil, func(ctx context.Context, api planv1.PlanServiceClient) (proto.Message, error) {
		return api.SetPolicy(ctx, req)
	})
	return c
}

func planRecordSuccessCmd(o *clientOptions) *cobra.Command {
	req := &planv1.RecordSuccessRequest{}
	var phase string
	c := &cobra.Command{Use: "record-success", Short: "Record a step's success: its retry count goes back to 0"}
	planFlags(c, &req.PlanId, &req.Namespace)
	c.Flags().StringVar(&phase, "phase", "", "phase of the step (required)")
	c.Flags().StringVar(&req.StepId, "step", "", "step id")
	c.RunE = planCall(o, []string{"plan", "phase"}, func() (err error) {
		req.Phase, err = parsePhase(phase)
		return err
	}, func(ctx context.Context, api planv1.PlanServiceClient) (proto.Message, error) {
		return api.RecordSuccess(ctx, req)
	})
	return c
}

func planMergeDetailsCmd(o *clientOptions) *cobra.Command {
	req := &planv1.MergeErrorDetailsRequest{}
	c := &cobra.Command{Use: "merge-details", Short: "Merge top-level keys into a plan's error_details object"}
	planFlags(c, &req.PlanId, &req.Namespace)
	c.Flags().StringVar(&req.DetailsJson, "details", "", "a JSON object whose keys are merged (required)")
	c.RunE = planCall(o, []string{"plan", "details"}, nil, func(ctx context.Context, api planv1.PlanServiceClient) (proto.Message, error) {
		return api.MergeErrorDetails(ctx, req)
	})
	return c
}

func parsePhase(s string) (planv1.Phase, error) {
	key := "PHASE_" + strings.TrimPrefix(strings.ToUpper(s), "PHASE_")
	if v, ok := planv1.Phase_value[key]; ok && v != 0 {
		return planv1.Phase(v), nil
	}
	return 0, fmt.Errorf("phase %q: want action, strategize, execute or apply", s)
}

func parseCategory(s string) (planv1.ErrorCategory, error) {
	key := "ERROR_CATEGORY_" + strings.TrimPrefix(strings.ToUpper(strings.ReplaceAll(s, "-", "_")), "ERROR_CATEGORY_")
	if v, ok := planv1.ErrorCategory_value[key]; ok && v != 0 {
		return planv1.ErrorCategory(v), nil
	}
	return 0, fmt.Errorf("category %q: want transient, auth, resource, merge_conflict, validation, tool, strategy_constraint, internal or unknown", s)
}

package errs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCodesRoundTrip(t *testing.T) {
	cases := []struct {
		err      *errs.Error
		sentinel error
		grpc     codes.Code
	}{
		{errs.InvalidArgument("role %q", "x"), errs.ErrInvalidArgument, codes.InvalidArgument},
		{errs.NotFound("session"), errs.ErrNotFound, codes.NotFound},
		{errs.AlreadyExists("session"), errs.ErrAlreadyExists, codes.AlreadyExists},
		{errs.FailedPrecondition("closed"), errs.ErrFailedPrecondition, codes.FailedPrecondition},
		{errs.ResourceExhausted("full"), errs.ErrResourceExhausted, codes.ResourceExhausted},
		{errs.Unavailable("stopping"), errs.ErrUnavailable, codes.Unavailable},
		{errs.Internal("bug"), errs.ErrInternal, codes.Internal},
		{errs.Unauthenticated("token"), errs.ErrUnauthenticated, codes.Unauthenticated},
		{errs.OutcomeUnknown("commit"), errs.ErrOutcomeUnknown, codes.DeadlineExceeded},
		{errs.PermissionDenied("reader"), errs.ErrPermissionDenied, codes.PermissionDenied},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("ctx: %w", c.err)
		if !errors.Is(wrapped, c.sentinel) {
			t.Errorf("%v does not match its sentinel", c.err)
		}
		if errors.Is(c.err, errs.ErrNotFound) != (c.sentinel == errs.ErrNotFound) {
			t.Errorf("%v matches the wrong sentinel", c.err)
		}
		st, _ := status.FromError(c.err)
		if st.Code() != c.grpc || st.Message() != c.err.Msg {
			t.Errorf("%v -> grpc %v %q", c.err, st.Code(), st.Message())
		}
		back := errs.From(st.Err())
		if back.Code != c.err.Code || back.Msg != c.err.Msg {
			t.Errorf("grpc round trip %v -> %v", c.err, back)
		}
		wire := errs.FromProto(errs.ToProto(c.err))
		if !errors.Is(wire, c.sentinel) {
			t.Errorf("proto round trip lost the code: %v", wire)
		}
	}
	if errs.CodeOf(context.DeadlineExceeded) != errs.UnavailableCode {
		t.Error("deadline should be unavailable")
	}
	if errs.CodeOf(errors.New("boom")) != errs.InternalCode {
		t.Error("plain errors should be internal")
	}
	// A client's own gRPC deadline means the same as OUTCOME_UNKNOWN: the
	// request may have been applied.
	if c := errs.CodeOf(status.Error(codes.DeadlineExceeded, "deadline")); c != errs.OutcomeUnknownCode {
		t.Errorf("gRPC DEADLINE_EXCEEDED -> %v, want OUTCOME_UNKNOWN", c)
	}
	if errs.From(nil) != nil || errs.ToProto(nil) != nil || errs.FromProto(nil) != nil {
		t.Error("nil must stay nil")
	}
}

// Every code of the wire enum has its own gRPC code, maps back to itself
// and has a name: a code appended to commonv1.ErrorCode without teaching
// this package fails here.
func TestEveryCodeIsMapped(t *testing.T) {
	seen := map[codes.Code]errs.Code{}
	for n := range commonv1.ErrorCode_name {
		c := errs.Code(n)
		if c == commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
			continue
		}
		g := errs.GRPCCode(c)
		if g == codes.Internal && c != errs.InternalCode {
			t.Errorf("%v has no gRPC code of its own", c)
		}
		if prev, dup := seen[g]; dup {
			t.Errorf("%v and %v both map to gRPC %v", prev, c, g)
		}
		seen[g] = c
		if back := errs.CodeOf(status.Error(g, "x")); back != c {
			t.Errorf("%v -> gRPC %v -> %v", c, g, back)
		}
		if msg := (&errs.Error{Code: c, Msg: "x"}).Error(); strings.HasPrefix(msg, "unknown") {
			t.Errorf("%v has no name: %q", c, msg)
		}
	}
}

// A status made by GRPCStatus carries the agentstate code in its details,
// so that a client tells the node's OUTCOME_UNKNOWN from its own deadline
// (both are gRPC DEADLINE_EXCEEDED), and a detail outranks the gRPC code.
func TestStatusDetailCarriesTheCode(t *testing.T) {
	st := errs.OutcomeUnknown("commit answer lost").GRPCStatus()
	var detail *commonv1.Error
	for _, d := range st.Details() {
		if e, ok := d.(*commonv1.Error); ok {
			detail = e
		}
	}
	if detail == nil || detail.GetCode() != errs.OutcomeUnknownCode || detail.GetMessage() != "commit answer lost" {
		t.Fatalf("details %v: want a commonv1.Error with OUTCOME_UNKNOWN", st.Details())
	}
	// A detail that disagrees with the gRPC code wins: it is the node's own
	// classification, the gRPC code only the nearest of gRPC's.
	odd, err := status.New(codes.Unknown, "x").WithDetails(&commonv1.Error{Code: errs.FailedPreconditionCode})
	if err != nil {
		t.Fatal(err)
	}
	if c := errs.CodeOf(odd.Err()); c != errs.FailedPreconditionCode {
		t.Errorf("detail FAILED_PRECONDITION on gRPC UNKNOWN -> %v", c)
	}
	if c := errs.From(odd.Err()).Code; c != errs.FailedPreconditionCode {
		t.Errorf("From: detail FAILED_PRECONDITION on gRPC UNKNOWN -> %v", c)
	}
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// chain runs the API's unary chain around handler.
func chain(m *metrics, handler grpc.UnaryHandler) (any, error) {
	ics := unaryChain(m, writer.NoWait, quietLog())
	info := &grpc.UnaryServerInfo{FullMethod: "/agentstate.session.v1.SessionService/Append"}
	h := handler
	for i := len(ics) - 1; i >= 0; i-- {
		ic, next := ics[i], h
		h = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, next) }
	}
	return h(context.Background(), nil)
}

func TestChainMapsErrorsToCodes(t *testing.T) {
	cases := []struct {
		err  error
		want codes.Code
	}{
		{errs.InvalidArgument("bad"), codes.InvalidArgument},
		{errs.NotFound("gone"), codes.NotFound},
		{errs.AlreadyExists("dup"), codes.AlreadyExists},
		{errs.FailedPrecondition("closed"), codes.FailedPrecondition},
		{errs.ResourceExhausted("full"), codes.ResourceExhausted},
		{errs.Unavailable("stopping"), codes.Unavailable},
		{errs.Unauthenticated("who"), codes.Unauthenticated},
		{context.DeadlineExceeded, codes.Unavailable},
		{errors.New("plain"), codes.Internal},
	}
	for _, tc := range cases {
		m := newMetrics()
		_, err := chain(m, func(context.Context, any) (any, error) { return nil, tc.err })
		if status.Code(err) != tc.want {
			t.Errorf("%v became %v, want %v", tc.err, status.Code(err), tc.want)
		}
		if got := counterValue(t, m.errors.WithLabelValues(tc.want.String())); got != 1 {
			t.Errorf("%v: errors{code=%v} = %v, want 1", tc.err, tc.want, got)
		}
	}
}

func TestChainMarksNetworkSenders(t *testing.T) {
	var waits = true
	_, err := chain(newMetrics(), func(ctx context.Context, _ any) (any, error) {
		waits = writer.Waits(ctx)
		return &sessionv1.AppendResponse{}, nil
	})
	if err != nil || waits {
		t.Fatalf("err=%v waits=%v; want the handler's context marked NoWait", err, waits)
	}
}

func TestChainRecoversPanics(t *testing.T) {
	m := newMetrics()
	_, err := chain(m, func(context.Context, any) (any, error) { panic("boom") })
	if status.Code(err) != codes.Internal {
		t.Fatalf("panic became %v, want INTERNAL", err)
	}
	if got := counterValue(t, m.recoveredPanics.WithLabelValues("api")); got != 1 {
		t.Fatalf("recovered = %v, want 1", got)
	}
	if got := counterValue(t, m.errors.WithLabelValues(codes.Internal.String())); got != 1 {
		t.Fatalf("errors{Internal} = %v, want 1 (observe must see the recovered panic)", got)
	}
}

func TestChainCountsAppends(t *testing.T) {
	m := newMetrics()
	stored := &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{{}, {}, {}}}
	dup := &sessionv1.AppendResponse{Messages: []*sessionv1.AppendedMessage{{}}, Duplicate: true}
	for _, r := range []*sessionv1.AppendResponse{stored, dup} {
		if _, err := chain(m, func(context.Context, any) (any, error) { return r, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got := counterValue(t, m.appended); got != 3 {
		t.Fatalf("appended messages = %v, want 3 (duplicates excluded)", got)
	}
	if got := counterValue(t, m.appends.WithLabelValues("duplicate")); got != 1 {
		t.Fatalf("duplicate turns = %v, want 1", got)
	}
}

// TestRequestsAreLoggedAtDebug: at --log-level debug every request leaves
// one line (method, the ids it names, final code, duration; never its
// content); at info none.
func TestRequestsAreLoggedAtDebug(t *testing.T) {
	req := &sessionv1.AppendRequest{SessionId: "01JDQ70000000000000000000S", Messages: []*sessionv1.NewMessage{
		{MessageId: "01JDQ70000000000000000000M", Content: "secret content"}}}
	run := func(level string) string {
		var buf bytes.Buffer
		log, err := NewLogger(&buf, "json", level)
		if err != nil {
			t.Fatal(err)
		}
		ics := unaryChain(newMetrics(), writer.NoWait, log)
		info := &grpc.UnaryServerInfo{FullMethod: "/agentstate.session.v1.SessionService/Append"}
		var h grpc.UnaryHandler = func(context.Context, any) (any, error) { return nil, errs.NotFound("session gone") }
		for i := len(ics) - 1; i >= 0; i-- {
			ic, next := ics[i], h
			h = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, next) }
		}
		if _, err := h(context.Background(), req); status.Code(err) != codes.NotFound {
			t.Fatalf("chain answered %v", err)
		}
		return buf.String()
	}
	if out := run("info"); out != "" {
		t.Fatalf("at info a request logged %q", out)
	}
	out := run("debug")
	var rec map[string]any
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("want one JSON line, got %q", out)
	}
	for k, want := range map[string]any{
		"level": "DEBUG", "msg": "request", "method": "/agentstate.session.v1.SessionService/Append",
		"session_id": req.SessionId, "code": "NotFound", "error": "session gone",
	} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %v (line %s)", k, rec[k], want, out)
		}
	}
	if ids, _ := rec["message_ids"].([]any); len(ids) != 1 || ids[0] != "01JDQ70000000000000000000M" {
		t.Errorf("message_ids = %v", rec["message_ids"])
	}
	if _, ok := rec["duration"].(float64); !ok {
		t.Errorf("no duration in %s", out)
	}
	if strings.Contains(out, "secret content") {
		t.Errorf("the request's content was logged: %s", out)
	}
}

package server

import (
	"context"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
)

// The authorizer's cost per unary request: for the --auth-token-file
// principal (every grant: decided from the rule alone, no store read) and
// for a principal of one namespace (one session lookup, here a map, to
// show what the authorizer adds around the store's read).
func BenchmarkAuthorizeUnary(b *testing.B) {
	z := &authorizer{rules: apiRules(), sessionNamespace: func(context.Context, string) (string, error) { return "team", nil }}
	info := &grpc.UnaryServerInfo{FullMethod: sessionv1.SessionService_ListMessages_FullMethodName}
	req := &sessionv1.ListMessagesRequest{SessionId: "01JDQ6Z1V3T9Q2B8W4X5Y6Z7A8"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	limited, err := parseIdentities([]byte(`{"principals":[{"name":"app","token_sha256":["` + hashHex("t") + `"],"grants":[{"namespace":"team","role":"reader"}]}]}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *Principal
	}{
		{"token", tokenIdentities("t").byToken[sha256Of("t")]},
		{"one-namespace", limited.byToken[sha256Of("t")]},
	} {
		ctx := withPrincipal(context.Background(), c.p)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := z.unary(ctx, req, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every method the API serves, found through the registered services'
// descriptors, has an authorization rule: a method added to the contract
// without one fails here (and is refused for everyone meanwhile).
func TestEveryServedMethodHasARule(t *testing.T) {
	n := startAuthNode(t, writeIdentities(t, t.TempDir(), rootPrincipal), nil)
	rules := apiRules()
	served := servedMethods(n)
	for _, m := range served {
		if _, ok := rules[m]; !ok {
			t.Errorf("%s is served without an authorization rule (rules.go)", m)
		}
	}
	for m := range rules {
		if !slices.Contains(served, m) {
			t.Errorf("rule for %s, which the API does not serve", m)
		}
	}
}

func servedMethods(n *authNode) []string {
	var out []string
	for svc, info := range n.s.api.srv.GetServiceInfo() {
		for _, m := range info.Methods {
			out = append(out, "/"+svc+"/"+m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// need is what the role model asks of a method.
type need int

const (
	needAny need = iota
	needReader
	needWriter
	needAdmin
	needOperator
)

// matrixCase is how the matrix calls one method, and what it needs.
type matrixCase struct {
	need need
	// orOperator: the operator may too (imports into any namespace,
	// node-wide audit reads).
	orOperator bool
	// hide: the request names an entity, so a principal that cannot
	// read its namespace gets NOT_FOUND; else PERMISSION_DENIED.
	hide bool
	call func(e *callEnv) error
}

// want is the answer the model gives p for a call on namespace
// ns: the expectation is computed from the principals' declared roles, not
// from the authorizer's rules.
func (c matrixCase) want(p testPrincipal, ns string) codes.Code {
	switch {
	case p.token == "":
		return codes.Unauthenticated
	case c.need == needAny, c.orOperator && p.operator:
		return codes.OK
	case c.need == needOperator:
		if p.operator {
			return codes.OK
		}
		return codes.PermissionDenied
	}
	has := p.roles[ns]
	switch {
	case int(has) >= int(c.need):
		return codes.OK
	case has == roleNone && c.hide:
		return codes.NotFound
	}
	return codes.PermissionDenied
}

// TestAuthorizationMatrix runs every served method and stream as each of
// {no credential, reader, writer, admin of A, admin of B only, operator}
// on the objects of A and of B, asserts each answer, and that a refused
// request changed nothing: the fixtures read the same and no audit entry
// was added (but the auth_failure entries of refused credentials).
func TestAuthorizationMatrix(t *testing.T) {
	dir := t.TempDir()
	n := startAuthNode(t, writeIdentities(t, dir, append([]testPrincipal{rootPrincipal}, matrixPrincipals...)...), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cases := matrixCases()
	var fA, fB *fixture
	var cursor string
	dirty := true
	for _, method := range servedMethods(n) {
		c, ok := cases[method]
		if !ok {
			t.Errorf("%s has no case in the authorization matrix (matrixCases)", method)
			continue
		}
		for _, target := range []string{nsA, nsB} {
			for _, p := range matrixPrincipals {
				if dirty {
					fA, fB = n.newFixtures(ctx, t)
					_, cursor = n.auditSince(ctx, t, cursor, true)
					dirty = false
				}
				f, ns := fA, target
				if target == nsB {
					f = fB
				}
				before := n.fingerprint(ctx, t, fA, fB)
				cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
				err := c.call(&callEnv{ctx: as(cctx, p), n: n, f: f, p: p})
				ccancel()
				got, want := codeOf(err), c.want(p, ns)
				if got != want {
					t.Errorf("%s as %s on %s's objects: %v (%v), want %v", method, p.name, target, got, err, want)
				}
				if got == codes.OK {
					dirty = true
					continue
				}
				if after := n.fingerprint(ctx, t, fA, fB); after != before {
					t.Errorf("%s as %s on %s's objects was refused (%v) but changed the fixtures", method, p.name, target, got)
				}
				var added []string
				news, next := n.auditSince(ctx, t, cursor, false)
				for _, e := range news {
					added = append(added, e.GetEventType())
				}
				cursor = next
				if len(added) > 0 {
					t.Errorf("%s as %s on %s's objects was refused (%v) but stored audit entries %v", method, p.name, target, got, added)
				}
			}
		}
	}
}

// codeOf is the gRPC code of a call's outcome (an append stream's
// outcome is an *errs.Error).
func codeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if _, ok := status.FromError(err); ok {
		return status.Code(err)
	}
	return errs.GRPCCode(errs.CodeOf(err))
}

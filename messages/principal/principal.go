// Package principal carries, in a request's context, the name of the
// principal that request authenticated as, from where the node
// authenticates it (the gRPC server, the cluster's router) to where the
// audit entries it causes are built (session and plan owners, the audit
// service). The name is recorded in AuditEntry.principal, inside the
// hashed content; it is never taken from a client's message.
package principal

import "context"

// Names recorded when no authenticated principal caused an entry.
const (
	// Node: the node's own work (expiry sweeps).
	Node = "node"
	// Embedded: an in-process caller of the Go API whose context carries
	// no principal (it is trusted, as the embedded API is).
	Embedded = "embedded"
	// Anonymous: a gRPC request to a node without authentication (it
	// serves loopback only).
	Anonymous = "anonymous"
	// Remote: a bare Proto.Actor request from a peer that named none.
	Remote = "remote"
)

// Header is the Proto.Actor message header that names a bare request's
// principal: a cluster member writes it when it forwards a request to the
// owner's member, and the node's remote guard writes it over whatever a
// peer whose certificate names a principal wrote there. A peer naming
// none is a node of the deployment, trusted as the node.
const Header = "agentstate-principal"

// Reserved reports whether name is one of the names above, which no
// configured principal may take: the trail must tell them apart.
func Reserved(name string) bool {
	switch name {
	case Node, Embedded, Anonymous, Remote:
		return true
	}
	return false
}

type key struct{}

// With is ctx carrying name as its request's principal.
func With(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, key{}, name)
}

// Of is the principal of ctx's request: Embedded when none was set.
func Of(ctx context.Context) string {
	if n, ok := ctx.Value(key{}).(string); ok && n != "" {
		return n
	}
	return Embedded
}

// OrRemote is name, or Remote when it is empty (a bare request's header).
func OrRemote(name string) string {
	if name == "" {
		return Remote
	}
	return name
}

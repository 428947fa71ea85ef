package server

import (
	"net"
	"net/url"
	"strings"
)

// maskedPassword replaces a password wherever the node shows --data; it is
// what pgx itself prints in place of one in its errors.
const maskedPassword = "xxxxx"

// redactData is --data as the node may show it in a log line or an error:
// a PostgreSQL URL's password, in its user info or in a password or
// sslpassword parameter, is masked; anything else (a file, memory:NAME) is
// shown as given. Every line that shows --data goes through it, so the
// serving line cannot print what the error path masks.
func redactData(data string) string {
	if !isPostgres(data) {
		return data
	}
	u, err := url.Parse(data)
	if err != nil {
		// Not a URL the node can show safely: the scheme only.
		scheme, _, _ := strings.Cut(data, "://")
		return scheme + "://(unparsable URL, not shown)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), maskedPassword)
	}
	if q := u.Query(); len(q) > 0 {
		masked := false
		for k := range q {
			if k == "password" || k == "sslpassword" {
				q.Set(k, maskedPassword)
				masked = true
			}
		}
		if masked {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

// exposedWarning is the warning logged when the gRPC API listens on addr
// (the bound address) beyond loopback with neither TLS nor a token, which
// docs/OPERATIONS.md ("Threat model") says not to do; "" when it does not.
func exposedWarning(addr net.Addr, tls, token bool) string {
	if tls && token {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil || isLoopbackHost(host) {
		return ""
	}
	switch {
	case !tls && !token:
		return "the gRPC API listens beyond loopback with neither TLS nor a token: whoever reaches this address " +
			"can read and change every session, plan and audit entry; use --tls-cert/--tls-key and --auth-token-file " +
			"(docs/OPERATIONS.md, \"Threat model\")"
	case !tls:
		return "the gRPC API listens beyond loopback without TLS: the token and every request cross the network in " +
			"clear; use --tls-cert/--tls-key (docs/OPERATIONS.md, \"Threat model\")"
	default:
		return "the gRPC API listens beyond loopback without a token: whoever reaches this address can read and " +
			"change everything; use --auth-token-file (docs/OPERATIONS.md, \"Threat model\")"
	}
}

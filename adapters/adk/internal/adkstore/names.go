package adkstore

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// Where an ADK session lives in agentstate. ADK names a session by (app,
// user, session id); agentstate by namespace and client key:
//
//   - namespace: Options.NamespacePrefix + app, so that List(app) is one
//     server-side filter and apps never share a key space;
//   - actor_name: the user id, so that List(app, user) is a server-side
//     filter too;
//   - client_key: the escaped user id, "/", then ADK's session id as
//     given. The user is part of the key because ADK's ids are unique per
//     (app, user), not per app; escaping it (url.PathEscape turns "/" into
//     "%2F") leaves the first "/" as the only separator, so no two (user,
//     id) pairs share a key.
//
// App and user state are shared scopes, changed in the same transaction as
// the event that carries their delta: scopeApp(app) and scopeUser(app,
// user), both escaped the same way.

// The state key prefixes of ADK (session.KeyPrefixApp, ...), the same in
// every ADK version; each version's package checks them in a test.
const (
	PrefixApp  = "app:"
	PrefixUser = "user:"
	PrefixTemp = "temp:"
)

// metaKey marks the sessions this package created: their metadata_json is
// {"adk": {"app": ..., "user": ..., "session": ...}}, so List reads the
// names back without parsing keys and skips anything else in the namespace.
const metaKey = "adk"

type sessionMeta struct {
	App     string `json:"app"`
	User    string `json:"user"`
	Session string `json:"session"`
}

func (s *Service[E]) namespace(app string) string { return s.opts.NamespacePrefix + app }

func clientKey(user, id string) string { return url.PathEscape(user) + "/" + id }

func scopeApp(app string) string { return "app:" + url.PathEscape(app) }

func scopeUser(app, user string) string {
	return "user:" + url.PathEscape(app) + "/" + url.PathEscape(user)
}

func encodeMeta(app, user, id string) (string, error) {
	b, err := json.Marshal(map[string]sessionMeta{metaKey: {App: app, User: user, Session: id}})
	return string(b), err
}

// decodeMeta returns the ADK names of a session this package created; ok is
// false for any other session.
func decodeMeta(metadataJSON string) (sessionMeta, bool) {
	var m map[string]sessionMeta
	if json.Unmarshal([]byte(metadataJSON), &m) != nil {
		return sessionMeta{}, false
	}
	sm, ok := m[metaKey]
	return sm, ok && sm.App != "" && sm.User != "" && sm.Session != ""
}

// deltas is an ADK state delta split the way ADK's own services split it:
// "app:" and "user:" keys (prefix removed) go to the shared scopes, "temp:"
// keys go nowhere (they live for one invocation, in the handle only), the
// rest is the session's own state.
type deltas struct {
	session, app, user *sessionv1.StateDelta
}

func splitDelta(delta map[string]any) (deltas, error) {
	var d deltas
	put := func(dst **sessionv1.StateDelta, key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("adk: state key %q: the value is not JSON: %w", key, err)
		}
		if *dst == nil {
			*dst = &sessionv1.StateDelta{SetJson: map[string]string{}}
		}
		(*dst).SetJson[key] = string(b)
		return nil
	}
	for k, v := range delta {
		var err error
		switch {
		case strings.HasPrefix(k, PrefixTemp):
			continue
		case strings.HasPrefix(k, PrefixApp):
			err = put(&d.app, strings.TrimPrefix(k, PrefixApp), v)
		case strings.HasPrefix(k, PrefixUser):
			err = put(&d.user, strings.TrimPrefix(k, PrefixUser), v)
		default:
			err = put(&d.session, k, v)
		}
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

func (d deltas) scopes(app, user string) []*sessionv1.ScopeDelta {
	var out []*sessionv1.ScopeDelta
	if d.app != nil {
		out = append(out, &sessionv1.ScopeDelta{Scope: scopeApp(app), Delta: d.app})
	}
	if d.user != nil {
		out = append(out, &sessionv1.ScopeDelta{Scope: scopeUser(app, user), Delta: d.user})
	}
	return out
}

// mergeState is what ADK's services hand out as a session's state: the
// session's own keys, then the app scope's keys as "app:k" and the user
// scope's as "user:k".
func mergeState(app, user string, resp *sessionv1.GetStateResponse) (map[string]any, error) {
	out := map[string]any{}
	if err := decodeInto(out, "", resp.GetStateJson()); err != nil {
		return nil, fmt.Errorf("adk: session state: %w", err)
	}
	for _, sc := range resp.GetScopes() {
		var prefix string
		switch sc.GetScope() {
		case scopeApp(app):
			prefix = PrefixApp
		case scopeUser(app, user):
			prefix = PrefixUser
		default:
			continue
		}
		if err := decodeInto(out, prefix, sc.GetStateJson()); err != nil {
			return nil, fmt.Errorf("adk: scope %s: %w", sc.GetScope(), err)
		}
	}
	return out, nil
}

func decodeInto(dst map[string]any, prefix, stateJSON string) error {
	if stateJSON == "" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(stateJSON), &m); err != nil {
		return err
	}
	for k, v := range m {
		dst[prefix+k] = v
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The CLI verbs of session state, truncation, the snapshot slot and
// expiry (issue 18), and the flags they add to create, get, append and
// messages.

func sessionStateCmd(o *clientOptions) *cobra.Command {
	c := &cobra.Command{Use: "state", Short: "Read or change a session's state and shared scopes"}
	c.AddCommand(sessionStateGetCmd(o), sessionStateUpdateCmd(o), sessionStateScopesCmd(o))
	return c
}

func sessionStateGetCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.GetStateRequest{}
	c := &cobra.Command{
		Use:   "get",
		Short: "Show a session's state (with its next sequence) and the scopes named",
		Long: "get prints {\"state_json\":...,\"next_sequence\":...,\"scopes\":[...]}: the session's state and the shared\n" +
			"scopes named with --scope. With --scope and no --session it reads the scopes only and prints\n" +
			"{\"scopes\":[...]}: shared scopes belong to no session.",
	}
	c.Flags().StringVar(&req.SessionId, "session", "", "session id (optional when --scope is given: then only the scopes are read)")
	c.Flags().StringArrayVar(&req.Scopes, "scope", nil, `a shared scope to show, e.g. "app:myapp"; repeat for more`)
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if req.SessionId == "" && len(req.Scopes) == 0 {
			return usagef(cmd, "give --session, --scope or both")
		}
		if req.SessionId != "" {
			return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
				return sessionv1.NewSessionServiceClient(cl.conn).GetState(ctx, req)
			})
		}
		ctx, cancel := cl.ctx(cmd.Context())
		defer cancel()
		resp, err := sessionv1.NewSessionServiceClient(cl.conn).GetState(ctx, req)
		if err != nil {
			return err
		}
		return cl.printScopes(resp.GetScopes())
	})
	return c
}

// printScopes prints {"scopes":[...]}: the answer of a GetState that asked
// for no session, without the empty session fields that would read as a
// session with no state.
func (c *client) printScopes(scopes []*sessionv1.ScopeState) error {
	items := make([]json.RawMessage, len(scopes))
	for i, s := range scopes {
		b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(s)
		if err != nil {
			return err
		}
		items[i] = b
	}
	b, err := json.Marshal(map[string][]json.RawMessage{"scopes": items})
	if err != nil {
		return err
	}
	if _, err := c.out.Write(b); err != nil {
		return err
	}
	return c.out.WriteByte('\n')
}

// deltaFlags are --set key=JSON and --delete key, and --scope, which sends
// them to a shared scope instead of the session's own state.
type deltaFlags struct {
	set, del []string
	scope    string
}

func (d *deltaFlags) register(c *cobra.Command) {
	c.Flags().StringArrayVar(&d.set, "set", nil, `set a state key to a JSON value: key=JSON (e.g. count=3, name='"x"'); repeat`)
	c.Flags().StringArrayVar(&d.del, "delete", nil, "delete a state key; repeat")
	c.Flags().StringVar(&d.scope, "scope", "", `apply --set/--delete to this shared scope (e.g. "app:myapp") instead of the session's state`)
}

// deltas returns the session's delta and the scope deltas the flags give.
func (d *deltaFlags) deltas(cmd *cobra.Command) (*sessionv1.StateDelta, []*sessionv1.ScopeDelta, error) {
	if len(d.set) == 0 && len(d.del) == 0 {
		if d.scope != "" {
			return nil, nil, usagef(cmd, "--scope needs --set or --delete")
		}
		return nil, nil, nil
	}
	delta := &sessionv1.StateDelta{Delete: d.del}
	for _, kv := range d.set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, nil, usagef(cmd, "--set %q: want key=JSON", kv)
		}
		if delta.SetJson == nil {
			delta.SetJson = map[string]string{}
		}
		delta.SetJson[k] = v
	}
	if d.scope != "" {
		return nil, []*sessionv1.ScopeDelta{{Scope: d.scope, Delta: delta}}, nil
	}
	return delta, nil, nil
}

func sessionStateUpdateCmd(o *clientOptions) *cobra.Command {
	var (
		sessionID string
		d         deltaFlags
		expect    int64
	)
	c := &cobra.Command{Use: "update", Short: "Change a session's state (or a shared scope) without appending a message"}
	sessionFlag(c, &sessionID)
	d.register(c)
	c.Flags().Int64Var(&expect, "expect", 0, "apply only if the session's next sequence is this")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		sd, scopes, err := d.deltas(cmd)
		if err != nil {
			return err
		}
		if sd == nil && scopes == nil {
			return usagef(cmd, "give --set or --delete")
		}
		req := &sessionv1.UpdateStateRequest{SessionId: sessionID, StateDelta: sd, ScopeDeltas: scopes}
		if cmd.Flags().Changed("expect") {
			req.ExpectedNextSequence = &expect
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).UpdateState(ctx, req)
		})
	})
	return c
}

func sessionTruncateCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.TruncateRequest{}
	c := &cobra.Command{Use: "truncate", Short: "Remove a session's messages up to a sequence (the next sequence stays)"}
	sessionFlag(c, &req.SessionId)
	c.Flags().Int64Var(&req.ThroughSequence, "through", 0, "remove messages with sequence <= this (required)")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session", "through"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).Truncate(ctx, req)
		})
	})
	return c
}

func sessionSnapshotCmd(o *clientOptions) *cobra.Command {
	c := &cobra.Command{Use: "snapshot", Short: "A session's snapshot slot: put, get, delete"}
	put := &sessionv1.PutSnapshotRequest{}
	var file string
	p := &cobra.Command{Use: "put", Short: "Replace the snapshot with a file's bytes (- for stdin)"}
	sessionFlag(p, &put.SessionId)
	p.Flags().Int64Var(&put.Sequence, "sequence", -1, "the sequence the snapshot covers (-1: before any message); from the truncation point (first_sequence-1) to the last message")
	p.Flags().StringVar(&file, "file", "", "file holding the snapshot's bytes (required; - for stdin)")
	p.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session", "file"); err != nil {
			return err
		}
		b, err := readInput(cmd, file)
		if err != nil {
			return err
		}
		put.Data = b
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).PutSnapshot(ctx, put)
		})
	})
	get := &sessionv1.GetSnapshotRequest{}
	g := &cobra.Command{Use: "get", Short: "Show the snapshot (its data base64, as JSON shows bytes)"}
	sessionFlag(g, &get.SessionId)
	g.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).GetSnapshot(ctx, get)
		})
	})
	del := &sessionv1.DeleteSnapshotRequest{}
	d := &cobra.Command{Use: "delete", Short: "Empty the slot if its snapshot covers no more than --through"}
	sessionFlag(d, &del.SessionId)
	d.Flags().Int64Var(&del.ThroughSequence, "through", 1<<62, "delete only a snapshot with sequence <= this (default: any)")
	d.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).DeleteSnapshot(ctx, del)
		})
	})
	c.AddCommand(p, g, d)
	return c
}

func sessionExpireCmd(o *clientOptions) *cobra.Command {
	req := &sessionv1.SetExpiryRequest{}
	var (
		ttl time.Duration
		at  string
	)
	c := &cobra.Command{Use: "expire", Short: "Set (--ttl or --at) or clear (--clear) a session's expiry"}
	sessionFlag(c, &req.SessionId)
	c.Flags().DurationVar(&ttl, "ttl", 0, "expire this long from now (e.g. 24h)")
	c.Flags().StringVar(&at, "at", "", "expire at this RFC 3339 time")
	c.Flags().BoolVar(&req.Clear, "clear", false, "never expire")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		if cmd.Flags().Changed("ttl") {
			req.Ttl = durationpb.New(ttl)
		}
		if at != "" {
			t, err := time.Parse(time.RFC3339Nano, at)
			if err != nil {
				return usagef(cmd, "--at %q: %v", at, err)
			}
			req.ExpiresAt = timestamppb.New(t)
		}
		return call(cmd, cl, func(ctx context.Context) (proto.Message, error) {
			return sessionv1.NewSessionServiceClient(cl.conn).SetExpiry(ctx, req)
		})
	})
	return c
}

// timeFlag parses an RFC 3339 flag value; "" is unset.
func timeFlag(cmd *cobra.Command, name, v string) (*timestamppb.Timestamp, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, usagef(cmd, "--%s %q: %v", name, v, err)
	}
	return timestamppb.New(t), nil
}

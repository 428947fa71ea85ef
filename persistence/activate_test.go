package persistence_test

import (
	"errors"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
)

// dialect is a store's side of ApplyActivate, in memory: the session as
// it stands, and what the flow asked of it.
type dialect struct {
	recorder
	epoch   int64
	fresh   bool
	exists  bool
	active  bool
	next    int64
	state   string
	at      int64
	applied persistence.Command
}

func (d *dialect) TakeEpoch(_ persistence.OwnerKind, _ string, fresh bool) (int64, error) {
	d.epoch++
	d.fresh = fresh
	return d.epoch, nil
}

func (d *dialect) ReadMark(string) (bool, int64, int64, error) { return d.exists, d.next, d.at, nil }

func (d *dialect) ReadHead(string) (*persistence.SessionHead, error) {
	if !d.exists || !d.active {
		return nil, nil
	}
	return &persistence.SessionHead{NextSequence: d.next, State: d.state, UpdatedAt: time.Unix(0, d.at).UTC()}, nil
}

func (d *dialect) AppendMessages(c *persistence.AppendMessages) (persistence.Result, error) {
	d.applied = c
	return persistence.AppendResult{NextSequence: c.NextSequence + int64(len(c.Turns))}.Result(), nil
}

func (d *dialect) CreateSession(c *persistence.CreateSession) (persistence.Result, error) {
	d.applied = c
	return persistence.Result{}, nil
}

// A blind append is decided on the head the store read, after the epoch
// was taken, by the function a warm owner decides with; the owner's
// command is left as it was.
func TestApplyActivateDecidesABlindAppendOnTheStoredHead(t *testing.T) {
	d := &dialect{exists: true, active: true, next: 7, state: `{"a":1}`, at: 42}
	app := &persistence.AppendMessages{SessionID: "s", Turns: []persistence.Turn{{}}}
	res, err := persistence.ApplyActivate(&persistence.Activate{Kind: persistence.OwnerSession, ID: "s", Then: app}, d, d)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := d.applied.(*persistence.AppendMessages)
	if !ok || got == app {
		t.Fatalf("applied %T (the owner's own command: %v), want a copy of the append", d.applied, got == app)
	}
	want := &persistence.AppendMessages{}
	want.DecideSequence(persistence.SessionHead{NextSequence: 7, State: `{"a":1}`})
	if got.Epoch != 1 || got.NextSequence != want.NextSequence || got.State != want.State {
		t.Fatalf("applied epoch %d next %d state %q, want 1, %d, %q", got.Epoch, got.NextSequence, got.State, want.NextSequence, want.State)
	}
	if app.Epoch != 0 || app.NextSequence != 0 || app.State != "" {
		t.Fatalf("the owner's command changed: %+v", app)
	}
	if res.Epoch != 1 || res.Head == nil || res.Head.NextSequence != 7 || app.ResultOf(res).NextSequence != 8 {
		t.Fatalf("result %+v (head %+v)", res, res.Head)
	}
	if d.fresh {
		t.Fatal("an append's activation was taken as a new session's")
	}
}

func TestApplyActivateRefusesWithoutApplying(t *testing.T) {
	app := func() *persistence.AppendMessages {
		return &persistence.AppendMessages{SessionID: "s", Turns: []persistence.Turn{{}}}
	}
	for _, c := range []struct {
		name string
		d    *dialect
		cmd  *persistence.Activate
		want error
	}{
		{"blind, missing", &dialect{}, &persistence.Activate{Kind: persistence.OwnerSession, ID: "s", Then: app()}, persistence.ErrBlindRefused},
		{"blind, closed", &dialect{exists: true}, &persistence.Activate{Kind: persistence.OwnerSession, ID: "s", Then: app()}, persistence.ErrBlindRefused},
		{"written since the load", &dialect{exists: true, active: true, next: 4, at: 1},
			&persistence.Activate{Kind: persistence.OwnerSession, ID: "s", Then: app(),
				Loaded: &persistence.SessionMark{Exists: true, NextSequence: 3, UpdatedAt: time.Unix(0, 1)}}, persistence.ErrLoadedChanged},
		{"created since the load", &dialect{exists: true},
			&persistence.Activate{Kind: persistence.OwnerSession, ID: "s", Then: app(), Loaded: &persistence.SessionMark{}}, persistence.ErrLoadedChanged},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := persistence.ApplyActivate(c.cmd, c.d, c.d)
			if !errors.Is(err, c.want) || errs.CodeOf(err) != errs.FailedPreconditionCode {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if c.d.applied != nil {
				t.Fatalf("applied %T", c.d.applied)
			}
		})
	}
	d := &dialect{}
	if _, err := persistence.ApplyActivate(&persistence.Activate{Kind: 9, ID: "s"}, d, d); errs.CodeOf(err) != errs.InvalidArgumentCode || d.epoch != 0 {
		t.Fatalf("unknown kind: %v, epoch taken %d", err, d.epoch)
	}
	if _, err := persistence.ApplyActivate(&persistence.Activate{Kind: persistence.OwnerPlan, ID: "p", Then: app()}, d, d); errs.CodeOf(err) != errs.InvalidArgumentCode || d.applied != nil {
		t.Fatalf("a plan's folded write: %v, applied %T", err, d.applied)
	}
}

// A create folded into its activation tells the store the key is, most
// likely, new (SQLite takes epoch 1 in one statement then), and is applied
// with no load.
func TestApplyActivateFoldsACreate(t *testing.T) {
	d := &dialect{}
	create := &persistence.CreateSession{Session: &sessionv1.Session{SessionId: "s"}}
	res, err := persistence.ApplyActivate(&persistence.Activate{Kind: persistence.OwnerSession, ID: "s", Then: create}, d, d)
	if err != nil || !d.fresh || res.Epoch != 1 || res.Head != nil {
		t.Fatalf("err %v fresh %v result %+v", err, d.fresh, res)
	}
	if got, ok := d.applied.(*persistence.CreateSession); !ok || got.Epoch != 1 || create.Epoch != 0 {
		t.Fatalf("applied %+v", d.applied)
	}
}

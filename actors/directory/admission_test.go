package directory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/errs"
)

// TestAdmissionApportionsNetworkSendersByPrincipal: a network sender's
// request is admitted as the principal its context carries, so a flood
// that filled the backlog is held to half once another principal is
// refused, and its tickets give back what they took; an in-process
// caller is not apportioned.
func TestAdmissionApportionsNetworkSendersByPrincipal(t *testing.T) {
	a := &directory.Admission{Backlog: writer.NewBacklog(10, 1<<20)}
	network := func(p string) context.Context { return fairshare.With(writer.NoWait(context.Background()), p) }
	var flood []directory.Ticket
	for {
		tk, err := a.Admit(network("flood"), 100)
		if err != nil {
			break
		}
		flood = append(flood, tk)
	}
	if len(flood) != 10 {
		t.Fatalf("alone, the flood was admitted %d of 10 requests", len(flood))
	}
	if _, err := a.Admit(network("honest"), 100); !errors.Is(err, errs.ErrResourceExhausted) {
		t.Fatalf("honest against a full backlog: %v, want RESOURCE_EXHAUSTED", err)
	}
	for len(flood) > 5 {
		a.Release(flood[len(flood)-1])
		flood = flood[:len(flood)-1]
		if _, err := a.Admit(network("flood"), 100); !errors.Is(err, errs.ErrResourceExhausted) {
			t.Fatalf("the flood holding %d of 10 was admitted: %v", len(flood), err)
		}
	}
	var honest []directory.Ticket
	for range 5 {
		tk, err := a.Admit(network("honest"), 100)
		if err != nil {
			t.Fatalf("honest refused its share: %v", err)
		}
		honest = append(honest, tk)
	}
	for _, tk := range append(flood, honest...) {
		a.Release(tk)
	}
	if p := a.Backlog.Pending(); p != 0 {
		t.Fatalf("%d slots still held after every ticket was released", p)
	}
	// In-process callers wait for room instead, and are not apportioned:
	// one takes every slot.
	for range 10 {
		if _, err := a.Admit(context.Background(), 100); err != nil {
			t.Fatalf("an in-process caller: %v", err)
		}
	}
}

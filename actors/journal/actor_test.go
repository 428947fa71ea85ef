package journal_test

import (
	"github.com/agentstate/agentstate/actors/journal"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/persistence"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// recorder is a persistent actor as a Proto.Actor user writes one: its
// state is the list of strings it was sent, in order. A *StringValue is a
// command and, once persisted, the event; the snapshot is the whole list
// as a *ListValue. It answers a command with the index its event got,
// after the event committed.
type recorder struct {
	persistence.Mixin
	j *journal.Journal
	// truncate deletes the events a snapshot covers right after it.
	truncate bool
	values   []string
	// fromSnapshot is how many values the recovery took from a snapshot
	// (-1: none).
	fromSnapshot int
	// recovered is called once the replay is complete, with the state.
	recovered func(r *recorder)
	// acked is called after an event committed and was applied.
	acked func(index int, value string)
}

func (a *recorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.fromSnapshot = -1
	case *structpb.ListValue:
		a.values = a.values[:0]
		for _, v := range m.GetValues() {
			a.values = append(a.values, v.GetStringValue())
		}
		a.fromSnapshot = len(a.values)
	case *wrapperspb.StringValue:
		if a.Recovering() {
			a.values = append(a.values, m.GetValue())
			return
		}
		// The Mixin delivers RequestSnapshot inside PersistReceive, which
		// leaves the context without a sender: take it first.
		sender := ctx.Sender()
		a.PersistReceive(m)
		a.values = append(a.values, m.GetValue())
		idx := len(a.values) - 1
		if a.acked != nil {
			a.acked(idx, m.GetValue())
		}
		if sender != nil {
			ctx.Send(sender, wrapperspb.Int64(int64(idx)))
		}
	case *persistence.RequestSnapshot:
		// Asked for while persisting event len(values), before applying
		// it: the snapshot covers exactly the events before that index.
		list := &structpb.ListValue{}
		for _, v := range a.values {
			list.Values = append(list.Values, structpb.NewStringValue(v))
		}
		a.PersistSnapshot(list)
		if a.truncate && len(a.values) > 0 {
			a.j.DeleteEvents(ctx.Self().Id, len(a.values)-1)
		}
	case *persistence.ReplayComplete:
		if a.recovered != nil {
			a.recovered(a)
		}
	}
}

// recorderProps spawns recorders persisting in j; each incarnation is
// made by mk, so a test can hook its callbacks.
func recorderProps(j *journal.Journal, mk func() *recorder) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		r := mk()
		r.j = j
		return r
	}, actor.WithReceiverMiddleware(persistence.Using(j)))
}

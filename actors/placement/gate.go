package placement

import (
	"strings"
	"sync"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// activationGate refuses new activations while this member's membership is
// in doubt (MemberConfig.Etcd: the membership store does not answer, or
// dropped this member). Another member may then own the identity, and an
// activation here would take the session's epoch from it only to be fenced
// in turn: the caller gets UNAVAILABLE instead, which routers retry and
// clients take to another member.
//
// The gate is decided once per activation, when it starts: an activation
// that started before the doubt keeps serving (store fencing stops it if a
// newer one takes over). A refused activation answers every agentstate
// request it gets with UNAVAILABLE naming the reason, and stops, so that
// the next request finds no activation and asks the gate again.
type activationGate struct {
	// closed returns why activations are refused ("" while they are not).
	closed  func() string
	refused sync.Map // activation PID (string) -> reason, while it runs
}

// middleware is the gate as a receiver middleware of a kind's props. The
// chain is built once per props, so per-activation state is keyed by PID.
func (g *activationGate) middleware(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		self := c.Self().String()
		switch m := env.Message.(type) {
		case *actor.Started:
			if why := g.closed(); why != "" {
				g.refused.Store(self, why)
			}
		case *actor.Stopped:
			g.refused.Delete(self)
		case proto.Message:
			why, refused := g.refused.Load(self)
			if refused && strings.HasPrefix(string(m.ProtoReflect().Descriptor().FullName()), "agentstate.") {
				sys := c.ActorSystem()
				if env.Sender != nil {
					sys.Root.Send(env.Sender, errs.ToProto(errs.Unavailable("member %s takes no new activations: %s",
						sys.Address(), why)))
				}
				sys.Root.Stop(c.Self())
				return
			}
		}
		next(c, env)
	}
}

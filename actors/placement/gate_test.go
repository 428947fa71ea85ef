package placement

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
)

// An activation that starts while the gate is closed answers UNAVAILABLE
// naming why, without reaching the owner, and stops; one that started
// while it was open keeps serving after it closes.
func TestActivationGate(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var why atomic.Pointer[string]
	open := ""
	why.Store(&open)
	gate := &activationGate{closed: func() string { return *why.Load() }}
	var served atomic.Int64
	props := actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*sessionv1.GetSessionRequest); ok {
			served.Add(1)
			c.Respond(m)
		}
	}, actor.WithReceiverMiddleware(gate.middleware))

	before := sys.Root.Spawn(props)
	ask := func(pid *actor.PID) any {
		t.Helper()
		res, err := sys.Root.RequestFuture(pid, &sessionv1.GetSessionRequest{SessionId: "s"}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if _, ok := ask(before).(*sessionv1.GetSessionRequest); !ok {
		t.Fatal("the activation started while the gate was open did not serve")
	}
	lost := "etcd unreachable: context deadline exceeded"
	why.Store(&lost)

	// The refused activation, watched by a parent that reports its end.
	stopped := make(chan struct{})
	var once sync.Once
	spawned := make(chan *actor.PID, 1)
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			pid := c.Spawn(props)
			c.Watch(pid)
			spawned <- pid
		case *actor.Terminated:
			once.Do(func() { close(stopped) })
		}
	}))
	defer sys.Root.Stop(parent)
	pid := <-spawned
	res := ask(pid)
	e, ok := res.(*commonv1.Error)
	if !ok || e.GetCode() != errs.UnavailableCode || !strings.Contains(e.GetMessage(), "takes no new activations: "+lost) {
		t.Fatalf("refused activation answered %v, want UNAVAILABLE naming %q", res, lost)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the refused activation did not stop")
	}

	if res := ask(before); !isGet(res) {
		t.Fatalf("the activation started before the gate closed answered %v", res)
	}
	if n := served.Load(); n != 2 {
		t.Fatalf("the owner served %d requests, want 2 (the refused activation's never reached it)", n)
	}
}

func isGet(m any) bool {
	_, ok := m.(*sessionv1.GetSessionRequest)
	return ok
}

// A member that cannot reach etcd refuses to start, saying so.
func TestEtcdMemberNeedsEtcd(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	_, err := StartMember(sys, MemberConfig{Name: "c", Host: "127.0.0.1",
		Etcd: &EtcdConfig{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 300 * time.Millisecond}}, nil)
	if errs.CodeOf(err) != errs.UnavailableCode || !strings.Contains(err.Error(), "etcd 127.0.0.1:1") {
		t.Fatalf("StartMember without etcd: %v, want UNAVAILABLE naming the endpoint", err)
	}
	_, err = StartMember(sys, MemberConfig{Name: "c", Host: "127.0.0.1", Peers: []string{"127.0.0.1:1"},
		Etcd: &EtcdConfig{Endpoints: []string{"127.0.0.1:1"}}}, nil)
	if errs.CodeOf(err) != errs.InvalidArgumentCode {
		t.Fatalf("etcd with peers: %v, want INVALID_ARGUMENT", err)
	}
}

package dispatch_test

import (
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/dispatch"
	"github.com/asynkron/protoactor-go/actor"
)

// deep uses about 16 KiB of stack, as an owner's Receive does when it
// builds and submits a write; a fresh goroutine has to grow into it.
//
//go:noinline
func deep(n int) byte {
	var buf [1024]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return deep(n-1) + buf[n%len(buf)]
}

type pinger struct{ wg *sync.WaitGroup }

func (p pinger) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(int); ok {
		deep(16)
		p.wg.Done()
	}
}

// BenchmarkBursts sends one message at a time to 64 actors, so every
// message starts a mailbox burst: with the default dispatcher each burst is
// a new goroutine, with the pool an idle worker.
func BenchmarkBursts(b *testing.B) {
	for _, c := range []struct {
		name string
		d    func() (actor.Dispatcher, func())
	}{
		{"default", func() (actor.Dispatcher, func()) { return actor.NewDefaultDispatcher(300), func() {} }},
		{"pool", func() (actor.Dispatcher, func()) { p := dispatch.NewPool(32, 0); return p, p.Close }},
	} {
		b.Run(c.name, func(b *testing.B) {
			sys := quietSystem()
			defer sys.Shutdown()
			d, closeD := c.d()
			defer closeD()
			var wg sync.WaitGroup
			pids := make([]*actor.PID, 64)
			for i := range pids {
				pids[i] = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return pinger{wg: &wg} }).
					Configure(actor.WithDispatcher(d)))
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				wg.Add(1)
				sys.Root.Send(pids[i%len(pids)], i)
				if i%len(pids) == len(pids)-1 {
					wg.Wait() // every mailbox idle again: the next messages start bursts
				}
			}
			wg.Wait()
		})
	}
}

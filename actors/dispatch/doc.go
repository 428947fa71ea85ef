// Package dispatch runs actor mailboxes on long-lived goroutines.
//
// protoactor-go's default dispatcher starts a new goroutine for every
// mailbox burst (each time an idle actor receives a message). A fresh
// goroutine starts with a small stack, and an owner's Receive — message
// validation, protobuf building, a Request to the writer — grows it
// again on every burst. A Pool keeps a fixed set of worker goroutines whose
// stacks stay grown, and hands each burst to an idle one.
//
// Use it through the props of an actor kind:
//
//	props := actor.PropsFromProducer(newOwner).Configure(actor.WithDispatcher(dispatch.Shared()))
//
// Shared is one pool for the process, sized for GOMAXPROCS; NewPool makes
// a separate one (tests, or a kind that should not share workers). A Pool
// never makes a burst wait: when every worker is busy, Schedule falls back
// to a goroutine of its own, exactly as the default dispatcher does, so an
// actor that blocks in Receive cannot stall the others.
package dispatch

// Package placement runs agentstate's session and plan actors as
// Proto.Actor cluster kinds, so that any member of a cluster reaches any
// session or plan by id, and routes the façades' writes to them.
//
// Embedding in your own cluster:
//
//	router := placement.NewRouter(placement.RouterConfig{})
//	node, _ := actors.Start(sys, store, actors.Config{
//		Sessions: session.Config{Router: router},
//		Plans:    plan.Config{Router: router},
//	})
//	cfg := cluster.Configure(name, provider, disthash.New(), remoteCfg,
//		cluster.WithKinds(placement.Kinds(node.Sessions(), node.Plans())...),
//		cluster.WithRequestTimeout(placement.DefaultRequestTimeout))
//	c := cluster.New(sys, cfg)
//	c.StartMember()
//	router.Bind(c)
//
// Calls use plain cluster.Request with bare agentstate protobuf requests
// (the kinds answer the response message or a *commonv1.Error), not
// generated grains: the session and plan actors already speak those
// messages to remote senders, and the façades stay the one typed API.
//
// The cluster does not guarantee one activation per id: after a member
// rejoins, two members may each activate the same session for a while
// (protoactor-go issue #799). Correctness does not rest on placement: every
// activation takes a new epoch from the store and every write carries it
// (persistence fencing), so only the newest activation can write; an older
// one's writes fail, it answers UNAVAILABLE and stops, and the Router
// retries. Router retries, within the caller's deadline, only attempts known
// to have done nothing (an UNAVAILABLE answer, an owner lookup that did not
// answer within the short per-attempt timeout, a dead letter, a request to
// a member whose connection was down from its send to the attempt's end,
// so it never left: endpointWatch); a request sent but unanswered fails
// OUTCOME_UNKNOWN, and the caller retries it only if it is idempotent
// (appends carry message ids; a RecordError does not).
// The Router follows its member's topology: a request in flight to a member
// that leaves fails OUTCOME_UNKNOWN as soon as the departure is seen, and
// an owner lookup waiting on it is abandoned and retried, instead of both
// waiting out the attempt timeout (the library answers nothing for a dead
// member); so a member's death costs its sessions about one provider poll.
//
// Member starts a member with the automanaged provider (a static peer
// list, no external server) or, with MemberConfig.Etcd, the library's etcd
// provider, where members join and leave at runtime. An etcd member checks
// its own registration (Member.Membership) and, while etcd does not answer
// or dropped it, refuses new activations UNAVAILABLE (activationGate) and
// its Router stops retrying: its view of the cluster is frozen, and another
// member may own what it would activate. Its peers delete a killed member's
// registration as soon as its remote port refuses connections (peerReaper),
// rather than waiting out the library's 3 s lease. Embedders may use the library's
// consul or kubernetes providers with the same Kinds and Router.
package placement

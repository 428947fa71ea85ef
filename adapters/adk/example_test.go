package adk_test

import (
	"context"
	"fmt"
	"log"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/adapters/adk"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/adk/session"
)

// The service embedded in a program: agentstate's actors on a SQLite
// database (here an in-memory one), and ADK's session service over their
// sessions service. A runner takes it as its SessionService.
func Example() {
	ctx := context.Background()
	store, err := sqlite.Open("memory:adk-example")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(quietLogger))
	defer sys.Shutdown()
	node, err := actors.Start(sys, store, actors.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Stop(ctx)

	svc := adk.New(node.Sessions(), adk.Options{})
	created, err := svc.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "u1", SessionID: "s1",
		State: map[string]any{"user:lang": "fr"}})
	if err != nil {
		log.Fatal(err)
	}
	ev := &session.Event{ID: "event1", Author: "user", Actions: session.EventActions{StateDelta: map[string]any{"topic": "trains"}}}
	if err := svc.AppendEvent(ctx, created.Session, ev); err != nil {
		log.Fatal(err)
	}
	got, err := svc.Get(ctx, &session.GetRequest{AppName: "app", UserID: "u1", SessionID: "s1"})
	if err != nil {
		log.Fatal(err)
	}
	lang, _ := got.Session.State().Get("user:lang")
	topic, _ := got.Session.State().Get("topic")
	fmt.Println(got.Session.Events().At(0).ID, lang, topic)
	// Output: event1 fr trains
}

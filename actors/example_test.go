package actors_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentstate/agentstate/actors"
	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence/sqlite"
	"github.com/asynkron/protoactor-go/actor"
)

// Embedding agentstate in your own actor system: open the store, start the
// node, use the services, stop the node, close the store.
func Example() {
	store, err := sqlite.Open("memory:example")
	if err != nil {
		panic(err)
	}
	defer store.Close() // after Stop: the writer flushes into it

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	node, err := actors.Start(sys, store, actors.Config{Writer: writer.Config{Logger: quiet}})
	if err != nil {
		panic(err)
	}
	defer node.Stop(context.Background())

	ctx := context.Background()
	created, err := node.Sessions().Create(ctx, &sessionv1.CreateSessionRequest{ActorName: "planner"})
	if err != nil {
		panic(err)
	}
	appended, err := node.Sessions().Append(ctx, &sessionv1.AppendRequest{
		SessionId: created.GetSession().GetSessionId(),
		Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: "What changed?"},
			{Role: sessionv1.Role_ROLE_ASSISTANT, Content: "Two files."},
		},
	})
	if err != nil {
		panic(err)
	}
	for _, m := range appended.GetMessages() {
		fmt.Println("sequence", m.GetSequence())
	}
	// Output:
	// sequence 0
	// sequence 1
}

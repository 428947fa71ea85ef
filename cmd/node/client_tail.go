package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/agentstate/agentstate/actors/feed"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func sessionTailCmd(o *clientOptions) *cobra.Command {
	req := &feedv1.TailSessionRequest{}
	c := &cobra.Command{
		Use:   "tail",
		Short: "Follow a session: its messages from a sequence, then each new one, as JSON lines",
		Long: `Prints the session's messages from --from (or only new ones with --now), one
SessionEvent per line, then every message as it commits, until the session is
closed or deleted or the node stops (the last line says which) or Ctrl-C. A
"rewound" line says the messages from its fromSequence on were replaced: those
printed from there are no longer current, and their replacements follow. To
resume, pass the last sequence printed + 1 as --from (after a rewound line, its
fromSequence).`,
	}
	c.Flags().StringVar(&req.SessionId, "session", "", "session id (required)")
	c.Flags().Int64Var(&req.FromSequence, "from", 0, "first sequence to print")
	c.Flags().BoolVar(&req.FromNow, "now", false, "print only messages committed from now on")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		if err := requireFlags(cmd, "session"); err != nil {
			return err
		}
		return tail[feedv1.SessionEvent, *feedv1.SessionEvent](cmd, cl, func(ctx context.Context) (grpc.ServerStreamingClient[feedv1.SessionEvent], error) {
			return feedv1.NewFeedServiceClient(cl.conn).TailSession(ctx, req)
		})
	})
	return c
}

func auditTailCmd(o *clientOptions) *cobra.Command {
	req := &feedv1.TailChangesRequest{Filter: &feedv1.ChangeFilter{}}
	c := &cobra.Command{
		Use:   "tail",
		Short: "Follow the change feed: entries after a position, then each new one, as JSON lines",
		Long: `Prints the audit trail's entries in commit order after --after (or only new
ones with --now), filtered, one ChangeEvent per line, then every entry as it
commits, until the node stops or Ctrl-C. To resume, pass the last position
printed as --after. --after is a position (a number, each entry's "position"),
not an event id as audit list's --after is.`,
	}
	c.Flags().Var(positionFlag{&req.AfterPosition}, "after", "print entries after this position (an entry's \"position\"; 0: the whole trail; "+
		"audit list --after takes an event id instead)")
	c.Flags().BoolVar(&req.FromNow, "now", false, "print only entries committed from now on")
	c.Flags().StringSliceVar(&req.Filter.EventTypes, "type", nil, fmt.Sprintf("only entries of these event types (repeat or comma-separate; at most %d)", feed.MaxFilterEventTypes))
	c.Flags().StringVar(&req.Filter.SessionId, "session", "", "only entries about this session")
	c.Flags().StringVar(&req.Filter.PlanId, "plan", "", "only entries about this plan")
	c.Flags().StringVar(&req.Filter.ActorName, "actor", "", "only entries of this actor")
	c.RunE = withClient(o, func(cmd *cobra.Command, cl *client) error {
		return tail[feedv1.ChangeEvent, *feedv1.ChangeEvent](cmd, cl, func(ctx context.Context) (grpc.ServerStreamingClient[feedv1.ChangeEvent], error) {
			return feedv1.NewFeedServiceClient(cl.conn).TailChanges(ctx, req)
		})
	})
	return c
}

// tail prints a feed stream line by line, flushing each line so a pipe
// sees it at once. Ctrl-C (or SIGTERM) ends it cleanly: what was received
// is printed and the exit status is 0. The stream has no deadline (the
// token comes with the connection).
func tail[E any, P interface {
	*E
	proto.Message
}](cmd *cobra.Command, cl *client, open func(context.Context) (grpc.ServerStreamingClient[E], error)) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stream, err := open(ctx)
	if err != nil {
		return interrupted(ctx, err)
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return interrupted(ctx, err)
		}
		if err := cl.print(P(ev)); err != nil {
			return err
		}
		if err := cl.out.Flush(); err != nil {
			return err
		}
	}
}

// interrupted turns the error of a stream the user interrupted into none.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil && status.Code(err) == codes.Canceled {
		return nil
	}
	return err
}

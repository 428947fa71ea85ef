package main

import (
	"errors"
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A broken import stream is UNAVAILABLE (import again) only while its
// trailer was not sent; after, the node may have made the session visible.
func TestImportErrAfterTrailerIsOutcomeUnknown(t *testing.T) {
	broken := status.Error(codes.Unavailable, "error reading from server: EOF")
	for _, c := range []struct {
		err      error
		complete bool
		want     errs.Code
	}{
		{broken, false, errs.UnavailableCode},
		{broken, true, errs.OutcomeUnknownCode},
		{status.Error(codes.InvalidArgument, "checksum verification failed"), true, errs.InvalidArgumentCode},
		{errors.New("local"), true, errs.InternalCode},
	} {
		if got := errs.CodeOf(importErr(c.err, c.complete)); got != c.want {
			t.Errorf("importErr(%v, trailer sent %v): %v; want %v", c.err, c.complete, got, c.want)
		}
	}
}

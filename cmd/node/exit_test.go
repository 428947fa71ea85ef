package main

import (
	"testing"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// Every code of the error model has an exit status of its own, from 3 on,
// so a script tells each class apart: a code appended to the model without
// one fails here.
func TestEveryCodeHasItsOwnExitStatus(t *testing.T) {
	seen := map[int]errs.Code{}
	for n := range commonv1.ErrorCode_name {
		c := errs.Code(n)
		if c == commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
			continue
		}
		got := exitCode(&errs.Error{Code: c, Msg: "x"})
		if got < exitInvalidArgument {
			t.Errorf("%v exits %d, a local or usage status", c, got)
		}
		if o, dup := seen[got]; dup {
			t.Errorf("%v and %v share exit status %d", c, o, got)
		}
		seen[got] = c
	}
	if got := exitCode(errs.PermissionDenied("reader of a")); got != 12 {
		t.Errorf("PERMISSION_DENIED exits %d, want 12", got)
	}
}

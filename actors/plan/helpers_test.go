package plan_test

import (
	"errors"

	"github.com/agentstate/agentstate/messages/errs"
)

func isInvalid(err error) bool { return errors.Is(err, errs.ErrInvalidArgument) }

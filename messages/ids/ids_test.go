package ids_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
)

func TestCheck(t *testing.T) {
	good := ids.New()
	if err := ids.Check("session_id", good); err != nil {
		t.Fatalf("fresh ULID rejected: %v", err)
	}
	for _, bad := range []string{"", "x", strings.ToLower(good), good + "0", good[:25], "8" + good[1:], "01HXM2A6K1P2E9Q9D4GQ7J4S7U"} {
		err := ids.Check("session_id", bad)
		if !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("Check(%q) = %v, want invalid argument", bad, err)
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add(ids.New())
	f.Add("")
	f.Add("01HXM2A6K1P2E9Q9D4GQ7J4S7Z")
	f.Fuzz(func(t *testing.T, s string) {
		err := ids.Check("id", s)
		if err != nil && !errors.Is(err, errs.ErrInvalidArgument) {
			t.Fatalf("wrong error type: %v", err)
		}
		if err == nil && (len(s) != 26 || strings.ToUpper(s) != s) {
			t.Fatalf("accepted %q", s)
		}
	})
}

func TestCheckPlanID(t *testing.T) {
	for _, ok := range []string{"p", "01HXM2A6K1P2E9Q9D4GQ7J4S7Z", "plan:2026.v1-a_b", strings.Repeat("a", 128)} {
		if err := ids.CheckPlanID("plan_id", ok); err != nil {
			t.Errorf("CheckPlanID(%q) = %v; want ok", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("a", 129), "a b", "a/b", "plan\x00", "plän", "\xff"} {
		err := ids.CheckPlanID("plan.plan_id", bad)
		if !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("CheckPlanID(%q) = %v; want INVALID_ARGUMENT", bad, err)
			continue
		}
		// One text for every refusal, naming the field and the rule.
		if msg := errs.From(err).Msg; !strings.HasPrefix(msg, "plan.plan_id ") ||
			!strings.HasSuffix(msg, " is not a plan id (1 to 128 bytes of [A-Za-z0-9._:-])") {
			t.Errorf("CheckPlanID(%q) says %q", bad, msg)
		}
	}
}

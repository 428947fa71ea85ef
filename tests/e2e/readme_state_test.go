package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
)

// TestREADMEStateCommands runs the README's state and conditional-append
// commands as written (bin/node being this build, $S a session with three
// messages, as after the README's first block) and checks what they claim:
// the --expect append is stored, the state and the shared scope read back,
// and the same --expect again is FAILED_PRECONDITION, exit 6.
func TestREADMEStateCommands(t *testing.T) {
	block := docBlock(t, filepath.Join("..", "..", "README.md"), "A session also has a state", "sh")
	n := startNode(t)
	var created sessionv1.CreateSessionResponse
	n.cli(nil, "session", "create", "--actor", "planner").ok(t, &created)
	sid := created.GetSession().GetSessionId()
	n.cli(nil, "session", "append", "--session", sid, "--role", "user", "--content", "What changed?").ok(t)
	n.cli(nil, "session", "append", "--session", sid, "--message", "assistant=Two files.", "--message", "user=Which?").ok(t)

	lines := strings.Split(strings.TrimSpace(block), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "--expect 3") {
		t.Fatalf("the README's state block changed; update this test:\n%s", block)
	}
	env := append(cleanEnv(), "AGENTSTATE_ADDR="+n.grpcAddr(), "S="+sid)
	sh := func(line string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", strings.ReplaceAll(line, "bin/node ", `"$NODE" `))
		cmd.Env = append(env, "NODE="+cliBin)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return string(out), 0
	}
	var last string
	for _, l := range lines {
		out, code := sh(l)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", l, code, out)
		}
		last = out
	}
	var state struct { // protojson: int64 as a string
		StateJSON    string `json:"state_json"`
		NextSequence string `json:"next_sequence"`
		Scopes       []struct {
			Scope     string `json:"scope"`
			StateJSON string `json:"state_json"`
		} `json:"scopes"`
	}
	if err := json.Unmarshal([]byte(last), &state); err != nil {
		t.Fatalf("state get printed %q: %v", last, err)
	}
	if state.NextSequence != "4" || !strings.Contains(state.StateJSON, `"step":2`) || !strings.Contains(state.StateJSON, `"owner":"ann"`) ||
		len(state.Scopes) != 1 || state.Scopes[0].Scope != "app:myapp" || !strings.Contains(state.Scopes[0].StateJSON, `"mode":"fast"`) {
		t.Fatalf("state get printed %s", last)
	}
	if _, code := sh(lines[0]); code != exitFailedPrecondition {
		t.Fatalf("the --expect 3 append again: exit %d, want %d", code, exitFailedPrecondition)
	}
}

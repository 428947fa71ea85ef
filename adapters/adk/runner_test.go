package adk_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"
	"google.golang.org/genai"
)

// scriptedModel stands in for an LLM: to a user's "I am in <city>" it
// answers with a call of remember_city; to the tool's answer it replies
// with text that quotes the tool's result. It records each request, so a
// test can see what history the agent handed it.
type scriptedModel struct {
	mu       sync.Mutex
	requests [][]*genai.Content
}

func (m *scriptedModel) Name() string { return "scripted" }

func (m *scriptedModel) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	m.mu.Lock()
	m.requests = append(m.requests, req.Contents)
	m.mu.Unlock()
	return func(yield func(*model.LLMResponse, error) bool) {
		if len(req.Contents) == 0 {
			yield(nil, fmt.Errorf("scripted model: an empty request"))
			return
		}
		last := req.Contents[len(req.Contents)-1]
		for _, p := range last.Parts {
			switch {
			case p.FunctionResponse != nil:
				r := p.FunctionResponse.Response
				yield(&model.LLMResponse{
					Content:      genai.NewContentFromText(fmt.Sprintf("Noted %v (visit %v).", r["city"], r["visits"]), genai.RoleModel),
					TurnComplete: true,
				}, nil)
				return
			case strings.HasPrefix(p.Text, "I am in "):
				call := &genai.FunctionCall{Name: "remember_city", Args: map[string]any{"city": strings.TrimPrefix(p.Text, "I am in ")}}
				yield(&model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: call}}}}, nil)
				return
			}
		}
		yield(nil, fmt.Errorf("scripted model: no script for %+v", last))
	}
}

type cityArgs struct {
	City string `json:"city"`
}

type cityResult struct {
	City   string `json:"city"`
	Visits int    `json:"visits"`
}

// rememberCity counts the user's visits in user state (shared by all the
// user's sessions), keeps the last city in session state, and leaves a
// temp: key that must never be stored.
func rememberCity(ctx agent.ToolContext, args cityArgs) (cityResult, error) {
	visits := 0
	if v, err := ctx.State().Get("user:visits"); err == nil {
		switch n := v.(type) {
		case float64: // read back from the store (JSON)
			visits = int(n)
		case int:
			visits = n
		}
	}
	visits++
	for k, v := range map[string]any{"user:visits": visits, "last_city": args.City, "temp:scratch": "invocation only"} {
		if err := ctx.State().Set(k, v); err != nil {
			return cityResult{}, err
		}
	}
	return cityResult{City: args.City, Visits: visits}, nil
}

func newRunner(t *testing.T, svc session.Service, m model.LLM) *runner.Runner {
	t.Helper()
	remember, err := functiontool.New(functiontool.Config{Name: "remember_city", Description: "Remembers the city the user is in."}, rememberCity)
	if err != nil {
		t.Fatal(err)
	}
	a, err := llmagent.New(llmagent.Config{Name: "travel_agent", Model: m, Instruction: "Keep track of the user's cities.", Tools: []tool.Tool{remember}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{AppName: "travel", Agent: a, SessionService: svc})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// turn runs one user message and returns the ids of the events the runner
// produced and the final text.
func turn(t *testing.T, r *runner.Runner, text string) (ids []string, final string) {
	t.Helper()
	for ev, err := range r.Run(t.Context(), "alice", "trip-1", genai.NewContentFromText(text, genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			t.Fatalf("run %q: %v", text, err)
		}
		ids = append(ids, ev.ID)
		if ev.IsFinalResponse() && ev.Content != nil && len(ev.Content.Parts) > 0 {
			final = ev.Content.Parts[0].Text
		}
	}
	return ids, final
}

// An ADK runner with an LLM agent (a scripted model, a function tool) keeps
// its conversation on agentstate across a restart of the store: the
// conversation is closed and reopened on the same SQLite file between two
// turns, and the second turn sees the first's events and state.
func TestRunnerConversationSurvivesRestart(t *testing.T) {
	backends := map[string]func(t *testing.T, path string) (session.Service, func()){
		"embedded": func(t *testing.T, path string) (session.Service, func()) {
			e, stop := openEmbedded(t, path)
			return e.Svc, stop
		},
		"grpc": func(t *testing.T, path string) (session.Service, func()) {
			svc, _, stop := startNode(t, path)
			return svc, stop
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			path := dbPath(t)
			llm := &scriptedModel{}

			svc, stop := open(t, path)
			if _, err := svc.Create(t.Context(), &session.CreateRequest{AppName: "travel", UserID: "alice", SessionID: "trip-1"}); err != nil {
				t.Fatal(err)
			}
			ids1, final1 := turn(t, newRunner(t, svc, llm), "I am in Paris")
			if final1 != "Noted Paris (visit 1)." {
				t.Fatalf("first turn's answer %q", final1)
			}
			stop()

			svc, _ = open(t, path)
			asked := len(llm.requests)
			ids2, final2 := turn(t, newRunner(t, svc, llm), "I am in Rome")
			if final2 != "Noted Rome (visit 2)." {
				t.Fatalf("second turn's answer %q: the tool did not see the first turn's user state", final2)
			}
			// The model's first request of the second turn carried the
			// first turn, read back from the store.
			history := llm.requests[asked]
			if len(history) != 5 || history[0].Parts[0].Text != "I am in Paris" || history[1].Parts[0].FunctionCall == nil ||
				history[2].Parts[0].FunctionResponse == nil || history[3].Parts[0].Text != "Noted Paris (visit 1)." ||
				history[4].Parts[0].Text != "I am in Rome" {
				t.Fatalf("the second turn's history: %s", contents(history))
			}

			got, err := svc.Get(t.Context(), &session.GetRequest{AppName: "travel", UserID: "alice", SessionID: "trip-1"})
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]string{}, ids1...), ids2...)
			var stored []string
			for ev := range got.Session.Events().All() {
				stored = append(stored, ev.ID)
			}
			// The runner yields every event but the user's message.
			if len(stored) != 8 || fmt.Sprint(stored[1:4]) != fmt.Sprint(want[:3]) || fmt.Sprint(stored[5:]) != fmt.Sprint(want[3:]) {
				t.Fatalf("stored event ids %v; the runner produced %v", stored, want)
			}
			st := got.Session.State()
			if v, _ := st.Get("last_city"); v != "Rome" {
				t.Errorf("last_city = %v", v)
			}
			if v, _ := st.Get("user:visits"); v != float64(2) {
				t.Errorf("user:visits = %v", v)
			}
			if _, err := st.Get("temp:scratch"); err == nil {
				t.Errorf("a temp: key was stored")
			}
			for ev := range got.Session.Events().All() {
				if _, ok := ev.Actions.StateDelta["temp:scratch"]; ok {
					t.Errorf("event %s was stored with a temp: key in its delta", ev.ID)
				}
			}

			// User state is shared by the user's sessions, and only hers.
			other, err := svc.Create(t.Context(), &session.CreateRequest{AppName: "travel", UserID: "alice", SessionID: "trip-2"})
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := other.Session.State().Get("user:visits"); v != float64(2) {
				t.Errorf("alice's new session: user:visits = %v", v)
			}
			bob, err := svc.Create(t.Context(), &session.CreateRequest{AppName: "travel", UserID: "bob", SessionID: "trip-1"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bob.Session.State().Get("user:visits"); err == nil {
				t.Errorf("bob sees alice's user state")
			}
		})
	}
}

func contents(cs []*genai.Content) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "[%s:", c.Role)
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				fmt.Fprintf(&b, " call %s%v", p.FunctionCall.Name, p.FunctionCall.Args)
			case p.FunctionResponse != nil:
				fmt.Fprintf(&b, " response %s%v", p.FunctionResponse.Name, p.FunctionResponse.Response)
			default:
				fmt.Fprintf(&b, " %q", p.Text)
			}
		}
		b.WriteString("] ")
	}
	return b.String()
}

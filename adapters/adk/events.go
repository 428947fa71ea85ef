package adk

import (
	"encoding/json"
	"fmt"

	"github.com/agentstate/agentstate/adapters/adk/internal/adkstore"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"
)

// storedEvent is an event without what the message itself carries (ID,
// Timestamp): the content of its message (adkstore.EventMessage).
// model.LLMResponse is embedded, so its fields sit at the top level of the
// JSON, like the event's own.
type storedEvent struct {
	model.LLMResponse
	InvocationID       string `json:",omitempty"`
	Branch             string `json:",omitempty"`
	Author             string `json:",omitempty"`
	Actions            session.EventActions
	LongRunningToolIDs []string `json:",omitempty"`
}

func encodeEvent(event *session.Event) (*sessionv1.NewMessage, error) {
	b, err := json.Marshal(storedEvent{
		LLMResponse:        event.LLMResponse,
		InvocationID:       event.InvocationID,
		Branch:             event.Branch,
		Author:             event.Author,
		Actions:            event.Actions,
		LongRunningToolIDs: event.LongRunningToolIDs,
	})
	if err != nil {
		return nil, fmt.Errorf("adk: event %q is not JSON: %w", event.ID, err)
	}
	return adkstore.EventMessage(event.ID, event.Author, event.Timestamp, b), nil
}

func decodeEvent(m *sessionv1.Message) (*session.Event, error) {
	ev := &session.Event{ID: m.GetMessageId(), Timestamp: adkstore.EventTime(m)}
	if !adkstore.IsEvent(m) {
		// Not written as an event: the text as a content of its role.
		ev.Author = adkstore.RoleAuthor(m.GetRole())
		ev.Content = genai.NewContentFromText(m.GetContent(), genai.Role(ev.Author))
		return ev, nil
	}
	var se storedEvent
	if err := json.Unmarshal([]byte(m.GetContent()), &se); err != nil {
		return nil, fmt.Errorf("adk: message %d (%s) is not an ADK event: %w", m.GetSequence(), m.GetMessageId(), err)
	}
	ev.LLMResponse = se.LLMResponse
	ev.InvocationID, ev.Branch, ev.Author = se.InvocationID, se.Branch, se.Author
	ev.Actions = se.Actions
	ev.LongRunningToolIDs = se.LongRunningToolIDs
	return ev, nil
}

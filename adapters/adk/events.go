package adk

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// An ADK event is one agentstate message:
//
//   - message_id: the event's ID as given ("event1", a UUID): agentstate
//     keeps the framework's ids, and a retry with the same id is
//     idempotent;
//   - event_time: the event's Timestamp, so Get's After and
//     NumRecentEvents are the server's time filter and last-N;
//   - role: user for events authored by "user", assistant otherwise;
//   - content: the rest of the event as JSON (storedEvent), the way ADK's
//     database service stores it, with temp: keys removed from its delta;
//   - metadata_json: {"adk_event": 1}, which marks the content format.
//     Messages without it (written by another client) read back as text
//     events whose author is their role.

const eventFormat = `{"adk_event":1}`

// storedEvent is an event without what the message itself carries (ID,
// Timestamp). model.LLMResponse is embedded, so its fields sit at the top
// level of the JSON, like the event's own.
type storedEvent struct {
	model.LLMResponse
	InvocationID       string `json:",omitempty"`
	Branch             string `json:",omitempty"`
	Author             string `json:",omitempty"`
	Actions            session.EventActions
	LongRunningToolIDs []string `json:",omitempty"`
}

// withoutTemp returns event with the temp: keys of its state delta removed:
// what is persisted and what later reads return. The caller's event is not
// changed; a copy is made only when there is something to remove.
func withoutTemp(event *session.Event) *session.Event {
	d := event.Actions.StateDelta
	temp := false
	for k := range d {
		if strings.HasPrefix(k, session.KeyPrefixTemp) {
			temp = true
			break
		}
	}
	if !temp {
		return event
	}
	kept := make(map[string]any, len(d))
	for k, v := range d {
		if !strings.HasPrefix(k, session.KeyPrefixTemp) {
			kept[k] = v
		}
	}
	c := *event
	c.Actions.StateDelta = kept
	return &c
}

func encodeEvent(event *session.Event) (*sessionv1.NewMessage, error) {
	se := storedEvent{
		LLMResponse:        event.LLMResponse,
		InvocationID:       event.InvocationID,
		Branch:             event.Branch,
		Author:             event.Author,
		Actions:            event.Actions,
		LongRunningToolIDs: event.LongRunningToolIDs,
	}
	b, err := json.Marshal(se)
	if err != nil {
		return nil, fmt.Errorf("adk: event %q is not JSON: %w", event.ID, err)
	}
	m := &sessionv1.NewMessage{
		Role:         sessionv1.Role_ROLE_ASSISTANT,
		Content:      string(b),
		MetadataJson: eventFormat,
		MessageId:    event.ID,
	}
	if event.Author == "user" {
		m.Role = sessionv1.Role_ROLE_USER
	}
	if !event.Timestamp.IsZero() {
		m.EventTime = timestamppb.New(event.Timestamp)
	}
	return m, nil
}

func decodeEvent(m *sessionv1.Message) (*session.Event, error) {
	ev := &session.Event{ID: m.GetMessageId()}
	if m.GetEventTime() != nil {
		ev.Timestamp = m.GetEventTime().AsTime()
	}
	if !isEvent(m.GetMetadataJson()) {
		// Not written by this package: the text as a content of its role.
		ev.Author = roleAuthor(m.GetRole())
		ev.Timestamp = m.GetCreatedAt().AsTime()
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

func isEvent(metadataJSON string) bool {
	var m map[string]any
	if json.Unmarshal([]byte(metadataJSON), &m) != nil {
		return false
	}
	_, ok := m["adk_event"]
	return ok
}

func roleAuthor(r sessionv1.Role) string {
	switch r {
	case sessionv1.Role_ROLE_USER:
		return "user"
	case sessionv1.Role_ROLE_SYSTEM:
		return "system"
	case sessionv1.Role_ROLE_TOOL:
		return "tool"
	}
	return "model"
}

// applyDelta is what an appended event does to a handle's state: every key
// of the delta, temp: keys included (they live in the handle for the rest
// of the invocation, as in ADK's own services).
func applyDelta(state map[string]any, delta map[string]any) {
	maps.Copy(state, delta)
}

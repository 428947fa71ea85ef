package adkstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
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
//   - content: the rest of the event as JSON, the way ADK's database
//     service stores it, with temp: keys removed from its delta. Every
//     version writes the fields it shares with the others under the same
//     names (Go's JSON decoding matches names without regard to case), so
//     a v1 service reads what v2 wrote, less the fields v1 lacks, and v2
//     reads what v1 wrote;
//   - metadata_json: {"adk_event": 1}, which marks the content format.
//     Messages without it (written by another client) read back as text
//     events whose author is their role.
const eventFormat = `{"adk_event":1}`

// EventMessage is the message that stores an event: id, author and time
// are the event's, content its JSON (without ID and Timestamp).
func EventMessage(id, author string, at time.Time, content []byte) *sessionv1.NewMessage {
	m := &sessionv1.NewMessage{
		Role:         sessionv1.Role_ROLE_ASSISTANT,
		Content:      string(content),
		MetadataJson: eventFormat,
		MessageId:    id,
	}
	if author == "user" {
		m.Role = sessionv1.Role_ROLE_USER
	}
	if !at.IsZero() {
		m.EventTime = timestamppb.New(at)
	}
	return m
}

// MarshalEvent is the message that stores an event: stored is the
// version's JSON form of the event without ID and Timestamp, which id,
// author and at are.
func MarshalEvent(id, author string, at time.Time, stored any) (*sessionv1.NewMessage, error) {
	b, err := json.Marshal(stored)
	if err != nil {
		return nil, fmt.Errorf("adk: event %q is not JSON: %w", id, err)
	}
	return EventMessage(id, author, at, b), nil
}

// UnmarshalEvent reads m's content into stored (the version's JSON form)
// when m was written as an event, and reports whether it was; a message
// that was not reads as TextEvent.
func UnmarshalEvent(m *sessionv1.Message, stored any) (bool, error) {
	if !IsEvent(m) {
		return false, nil
	}
	if err := json.Unmarshal([]byte(m.GetContent()), stored); err != nil {
		return true, fmt.Errorf("adk: message %d (%s) is not an ADK event: %w", m.GetSequence(), m.GetMessageId(), err)
	}
	return true, nil
}

// TextEvent is the author and content of the event a message not written
// as an event reads as: its text as a content of its role.
func TextEvent(m *sessionv1.Message) (author string, content *genai.Content) {
	author = RoleAuthor(m.GetRole())
	return author, genai.NewContentFromText(m.GetContent(), genai.Role(author))
}

// IsEvent reports whether m was written as an ADK event (by any version);
// its content is then the event's JSON.
func IsEvent(m *sessionv1.Message) bool {
	var meta map[string]any
	if json.Unmarshal([]byte(m.GetMetadataJson()), &meta) != nil {
		return false
	}
	_, ok := meta["adk_event"]
	return ok
}

// EventTime is the time an event read from m carries: its event time, or
// for a message not written as an event, its creation time.
func EventTime(m *sessionv1.Message) time.Time {
	if !IsEvent(m) {
		return m.GetCreatedAt().AsTime()
	}
	if m.GetEventTime() != nil {
		return m.GetEventTime().AsTime()
	}
	return time.Time{}
}

// RoleAuthor is the author of a message that was not written as an event.
func RoleAuthor(r sessionv1.Role) string {
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

// WithoutTemp returns delta without its temp: keys, and whether it had any
// (the caller's map is not changed; a copy is made only then): what is
// persisted and what later reads return.
func WithoutTemp(delta map[string]any) (map[string]any, bool) {
	temp := false
	for k := range delta {
		if strings.HasPrefix(k, PrefixTemp) {
			temp = true
			break
		}
	}
	if !temp {
		return delta, false
	}
	kept := make(map[string]any, len(delta))
	for k, v := range delta {
		if !strings.HasPrefix(k, PrefixTemp) {
			kept[k] = v
		}
	}
	return kept, true
}

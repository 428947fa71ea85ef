package adk

import (
	"github.com/agentstate/agentstate/adapters/adk/internal/adkstore"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
)

// storedEvent is an event without what the message itself carries (ID,
// Timestamp): the content of its message (adkstore.EventMessage). The
// fields v1 has are under v1's names, so either version reads what the
// other wrote; v2's workflow fields (IsolationScope, Routes,
// RequestedInput, Output, NodeInfo) follow. model.LLMResponse is
// embedded, so its fields sit at the top level of the JSON.
type storedEvent struct {
	model.LLMResponse
	InvocationID       string `json:",omitempty"`
	Branch             string `json:",omitempty"`
	Author             string `json:",omitempty"`
	Actions            session.EventActions
	LongRunningToolIDs []string              `json:",omitempty"`
	IsolationScope     string                `json:",omitempty"`
	Routes             []string              `json:",omitempty"`
	RequestedInput     *session.RequestInput `json:",omitempty"`
	Output             any                   `json:",omitempty"`
	NodeInfo           *session.NodeInfo     `json:",omitempty"`
}

func encodeEvent(event *session.Event) (*sessionv1.NewMessage, error) {
	return adkstore.MarshalEvent(event.ID, event.Author, event.Timestamp, storedEvent{
		LLMResponse:        event.LLMResponse,
		InvocationID:       event.InvocationID,
		Branch:             event.Branch,
		Author:             event.Author,
		Actions:            event.Actions,
		LongRunningToolIDs: event.LongRunningToolIDs,
		IsolationScope:     event.IsolationScope,
		Routes:             event.Routes,
		RequestedInput:     event.RequestedInput,
		Output:             event.Output,
		NodeInfo:           event.NodeInfo,
	})
}

func decodeEvent(m *sessionv1.Message) (*session.Event, error) {
	ev := &session.Event{ID: m.GetMessageId(), Timestamp: adkstore.EventTime(m)}
	var se storedEvent
	if isEvent, err := adkstore.UnmarshalEvent(m, &se); err != nil {
		return nil, err
	} else if !isEvent {
		ev.Author, ev.Content = adkstore.TextEvent(m)
		return ev, nil
	}
	ev.LLMResponse = se.LLMResponse
	ev.InvocationID, ev.Branch, ev.Author = se.InvocationID, se.Branch, se.Author
	ev.Actions = se.Actions
	ev.LongRunningToolIDs = se.LongRunningToolIDs
	ev.IsolationScope, ev.Routes, ev.RequestedInput = se.IsolationScope, se.Routes, se.RequestedInput
	ev.Output, ev.NodeInfo = se.Output, se.NodeInfo
	return ev, nil
}

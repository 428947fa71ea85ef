package session

import (
	"context"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
)

// Keyed items (issue 30): a message's item key, unique in its session, and
// kind are checked here and resolved by the store, inside the append's
// transaction (persistence.ResolveKeys); GetItem and ListItems read the
// store's key and kind indexes.

// checkItem checks a new message's item key, kind and conflict policy.
func checkItem(m *sessionv1.NewMessage) error {
	if err := persistence.CheckItemKey("item_key", m.GetItemKey()); err != nil {
		return err
	}
	if err := persistence.CheckKind("kind", m.GetKind()); err != nil {
		return err
	}
	switch m.GetOnKeyConflict() {
	case sessionv1.KeyConflict_KEY_CONFLICT_UNSPECIFIED:
	case sessionv1.KeyConflict_KEY_CONFLICT_KEEP_STORED:
		if m.GetItemKey() == "" {
			return errs.InvalidArgument("on_key_conflict is KEEP_STORED but item_key is empty")
		}
	default:
		return errs.InvalidArgument("on_key_conflict %v is not a key-conflict policy", m.GetOnKeyConflict())
	}
	return nil
}

// repeatedKey finds an item key given twice: messages[i] repeats
// messages[j], j < i. Most turns carry no key, so the map is made only
// for a keyed one.
func repeatedKey(msgs []*sessionv1.NewMessage) (i, j int, dup bool) {
	var seen map[string]int
	for i, m := range msgs {
		if m.ItemKey == "" {
			continue
		}
		if seen == nil {
			seen = make(map[string]int, len(msgs))
		}
		if j, ok := seen[m.ItemKey]; ok {
			return i, j, true
		}
		seen[m.ItemKey] = i
	}
	return 0, 0, false
}

// keepStored is a turn's Turn.KeepStored: nil when no message asks it.
func keepStored(msgs []*sessionv1.NewMessage) []bool {
	var out []bool
	for i, m := range msgs {
		if m.OnKeyConflict != sessionv1.KeyConflict_KEY_CONFLICT_KEEP_STORED {
			continue
		}
		if out == nil {
			out = make([]bool, len(msgs))
		}
		out[i] = true
	}
	return out
}

// GetItem reads one message by its item key.
func (s *Service) GetItem(ctx context.Context, req *sessionv1.GetItemRequest) (*sessionv1.GetItemResponse, error) {
	if err := ids.Check("session_id", req.GetSessionId()); err != nil {
		return nil, err
	}
	if req.GetItemKey() == "" {
		return nil, errs.InvalidArgument("item_key is empty")
	}
	if err := persistence.CheckItemKey("item_key", req.GetItemKey()); err != nil {
		return nil, err
	}
	m, err := s.env.reader.GetItem(ctx, req.GetSessionId(), req.GetItemKey())
	if err != nil {
		return nil, errs.From(err)
	}
	return &sessionv1.GetItemResponse{Message: m}, nil
}

// ListItems pages a session's messages by kind and key prefix. The next
// cursor is set when the limit or the byte cap left a matching message
// unread; an empty page of a missing session is NOT_FOUND, as ListMessages.
func (s *Service) ListItems(ctx context.Context, req *sessionv1.ListItemsRequest) (*sessionv1.ListItemsResponse, error) {
	f, err := itemFilter(req)
	if err != nil {
		return nil, err
	}
	page, more, err := s.env.reader.ListItems(ctx, f)
	if err != nil {
		return nil, errs.From(err)
	}
	if len(page) == 0 {
		if _, err := s.env.reader.GetSession(ctx, f.SessionID); err != nil {
			return nil, errs.From(err)
		}
	}
	out := &sessionv1.ListItemsResponse{Messages: page}
	if more && len(page) > 0 {
		next := page[len(page)-1].GetSequence()
		if !f.NewestFirst {
			next++
		}
		out.NextCursorSequence = &next
	}
	return out, nil
}

func itemFilter(req *sessionv1.ListItemsRequest) (persistence.ItemFilter, error) {
	f := persistence.ItemFilter{SessionID: req.GetSessionId(), Kind: req.GetKind(), KeyPrefix: req.GetKeyPrefix(),
		NewestFirst: req.GetNewestFirst()}
	if err := ids.Check("session_id", f.SessionID); err != nil {
		return f, err
	}
	if err := persistence.CheckKind("kind", f.Kind); err != nil {
		return f, err
	}
	if err := persistence.CheckItemKey("key_prefix", f.KeyPrefix); err != nil {
		return f, err
	}
	if req.CursorSequence != nil {
		if f.Cursor = req.GetCursorSequence(); f.Cursor < 0 {
			return f, errs.InvalidArgument("cursor_sequence %d is negative", f.Cursor)
		}
		f.HasCursor = true
	}
	var err error
	f.Limit, err = pageSize("limit", req.GetLimit())
	return f, err
}

package persistence

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
)

// A message id a ReplaceSuffix removed may be used again in its session
// only by a message with the same content (role, content, metadata). The
// stores remember each such id with ContentDigest of the removed message
// (table removed_message_ids), written in the replacement's transaction
// and deleted with the session. Bound: one row per distinct id removed by
// a replacement of a live session (never more than the messages ever
// appended to it); truncation and deletion remember nothing.

// RemovedID is one remembered id.
type RemovedID struct {
	MessageID, Digest string
}

// ContentDigest is the SHA-256 of what "the same content" compares: the
// role, the content and the metadata (empty = {}), length-prefixed.
func ContentDigest(m *sessionv1.Message) string {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(m.GetRole()))
	h.Write(b[:])
	for _, s := range []string{m.GetContent(), emptyObject(m.GetMetadataJson())} {
		binary.BigEndian.PutUint64(b[:], uint64(len(s)))
		h.Write(b[:])
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// removedIDs are the ids and digests of removed messages.
func removedIDs(removed []*sessionv1.Message) []RemovedID {
	out := make([]RemovedID, len(removed))
	for i, m := range removed {
		out[i] = RemovedID{m.GetMessageId(), ContentDigest(m)}
	}
	return out
}

// RemovedIDReused is the error for a message that uses a removed id with
// other content.
func RemovedIDReused(sessionID, messageID string) error {
	return errs.AlreadyExists("session %s: message id %s was removed by a replacement and may be used again only with the same content", sessionID, messageID)
}

// checkRemembered refuses a message of msgs (not stored: absent from
// stored) whose id an earlier replacement removed, with other content.
func checkRemembered(d SuffixDialect, id string, msgs []*sessionv1.Message, stored map[string]int64) error {
	var ids []string
	for _, m := range msgs {
		if _, ok := stored[m.GetMessageId()]; !ok {
			ids = append(ids, m.GetMessageId())
		}
	}
	if len(ids) == 0 {
		return nil
	}
	digests, err := d.RemovedDigests(id, ids)
	if err != nil {
		return err
	}
	return ReusedRemovedID(id, msgs, digests)
}

// ReusedRemovedID is the error for the first of msgs whose id has a
// remembered digest (digests, by id) other than its content's, or nil.
// The stores' appends check a turn's messages with it, after a probe that
// the session has remembered ids at all (so a session no replacement
// touched pays one index probe per append command).
func ReusedRemovedID(sessionID string, msgs []*sessionv1.Message, digests map[string]string) error {
	if len(digests) == 0 {
		return nil
	}
	for _, m := range msgs {
		if dg, ok := digests[m.GetMessageId()]; ok && dg != ContentDigest(m) {
			return RemovedIDReused(sessionID, m.GetMessageId())
		}
	}
	return nil
}

// MessageIDs are the ids of msgs.
func MessageIDs(msgs []*sessionv1.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.GetMessageId()
	}
	return out
}

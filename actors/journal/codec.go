package journal

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode/utf8"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// How events and snapshots are stored (the package doc states it for
// readers of the sessions). Encoding is deterministic, so a retried write
// carries the same bytes.

// typeKey is the metadata key naming an event's protobuf message type.
const typeKey = "proto_type"

// maxKeyBytes is the sessions service's limit on a client key.
const maxKeyBytes = 256

// hashedPrefix starts every hashed key; hashedLen is a hashed key's length.
const (
	hashedPrefix = "sha256:"
	hashedLen    = len(hashedPrefix) + 2*sha256.Size
)

var deterministic = proto.MarshalOptions{Deterministic: true}

// clientKey names the session of an actor's journal: the actor's name,
// unless the name cannot be a client key (empty, too long, not UTF-8,
// holding a NUL) or has the form of a hashed key; those are hashed.
//
// Invariant: the mapping is injective. A literal key never has the hashed
// form ("sha256:" and 64 lowercase hex digits), and every hashed key has
// it, so an actor named like another's hashed key is hashed itself rather
// than sharing that journal. A name that was stored literally before this
// rule keeps its key unless it has the hashed form.
func clientKey(actorName string) string {
	if actorName != "" && len(actorName) <= maxKeyBytes && utf8.ValidString(actorName) &&
		strings.IndexByte(actorName, 0) < 0 && !hashedForm(actorName) {
		return actorName
	}
	sum := sha256.Sum256([]byte(actorName))
	return hashedPrefix + hex.EncodeToString(sum[:])
}

// hashedForm reports whether s looks like a key clientKey hashed.
func hashedForm(s string) bool {
	if len(s) != hashedLen || !strings.HasPrefix(s, hashedPrefix) {
		return false
	}
	for _, c := range []byte(s[len(hashedPrefix):]) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func encodeEvent(event proto.Message) (*sessionv1.NewMessage, error) {
	if event == nil {
		return nil, errs.InvalidArgument("the event is nil")
	}
	b, err := deterministic.Marshal(event)
	if err != nil {
		return nil, errs.InvalidArgument("encoding the event: %v", err)
	}
	meta, err := json.Marshal(map[string]string{typeKey: string(event.ProtoReflect().Descriptor().FullName())})
	if err != nil {
		return nil, errs.Internal("encoding the event's metadata: %v", err)
	}
	return &sessionv1.NewMessage{
		Role:         sessionv1.Role_ROLE_SYSTEM,
		Content:      base64.StdEncoding.EncodeToString(b),
		MetadataJson: string(meta),
	}, nil
}

func (j *Journal) decodeEvent(m *sessionv1.Message) (proto.Message, error) {
	var meta map[string]any
	if err := json.Unmarshal([]byte(m.GetMetadataJson()), &meta); err != nil {
		return nil, errs.Internal("message %d: metadata is not JSON: %v", m.GetSequence(), err)
	}
	name, _ := meta[typeKey].(string)
	if name == "" {
		return nil, errs.Internal("message %d is not a journal event: its metadata has no %q", m.GetSequence(), typeKey)
	}
	mt, err := j.cfg.Types.FindMessageByName(protoreflect.FullName(name))
	if err != nil {
		return nil, errs.Internal("message %d: event type %s: %v", m.GetSequence(), name, err)
	}
	b, err := base64.StdEncoding.DecodeString(m.GetContent())
	if err != nil {
		return nil, errs.Internal("message %d: content is not base64: %v", m.GetSequence(), err)
	}
	ev := mt.New().Interface()
	if err := (proto.UnmarshalOptions{Resolver: j.cfg.Types}).Unmarshal(b, ev); err != nil {
		return nil, errs.Internal("message %d: decoding %s: %v", m.GetSequence(), name, err)
	}
	return ev, nil
}

// encodeSnapshot stores a snapshot as a google.protobuf.Any, which names
// its type.
func encodeSnapshot(snapshot proto.Message) ([]byte, error) {
	if snapshot == nil {
		return nil, errs.InvalidArgument("the snapshot is nil")
	}
	v, err := deterministic.Marshal(snapshot)
	if err != nil {
		return nil, errs.InvalidArgument("encoding the snapshot: %v", err)
	}
	a := &anypb.Any{TypeUrl: "type.googleapis.com/" + string(snapshot.ProtoReflect().Descriptor().FullName()), Value: v}
	return deterministic.Marshal(a)
}

func (j *Journal) decodeSnapshot(data []byte) (proto.Message, error) {
	var a anypb.Any
	if err := proto.Unmarshal(data, &a); err != nil {
		return nil, errs.Internal("the snapshot is not a google.protobuf.Any: %v", err)
	}
	msg, err := anypb.UnmarshalNew(&a, proto.UnmarshalOptions{Resolver: j.cfg.Types})
	if err != nil {
		return nil, errs.Internal("decoding the snapshot (%s): %v", a.GetTypeUrl(), err)
	}
	return msg, nil
}

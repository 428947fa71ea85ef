from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from agentstate.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
KEY_CONFLICT_KEEP_STORED: KeyConflict
KEY_CONFLICT_UNSPECIFIED: KeyConflict
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
ROLE_TOOL: Role
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
SESSION_STATE_ACTIVE: SessionState
SESSION_STATE_CLOSED: SessionState
SESSION_STATE_UNSPECIFIED: SessionState

class AppendBatch(_message.Message):
    __slots__ = ["appends"]
    APPENDS_FIELD_NUMBER: _ClassVar[int]
    appends: _containers.RepeatedCompositeFieldContainer[TaggedAppend]
    def __init__(self, appends: _Optional[_Iterable[_Union[TaggedAppend, _Mapping]]] = ...) -> None: ...

class AppendOutcomes(_message.Message):
    __slots__ = ["outcomes"]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[TaggedOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[TaggedOutcome, _Mapping]]] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ["expected_next_sequence", "messages", "scope_deltas", "session_id", "state_delta"]
    EXPECTED_NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_DELTAS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_DELTA_FIELD_NUMBER: _ClassVar[int]
    expected_next_sequence: int
    messages: _containers.RepeatedCompositeFieldContainer[NewMessage]
    scope_deltas: _containers.RepeatedCompositeFieldContainer[ScopeDelta]
    session_id: str
    state_delta: StateDelta
    def __init__(self, session_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[NewMessage, _Mapping]]] = ..., state_delta: _Optional[_Union[StateDelta, _Mapping]] = ..., scope_deltas: _Optional[_Iterable[_Union[ScopeDelta, _Mapping]]] = ..., expected_next_sequence: _Optional[int] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ["duplicate", "messages", "next_sequence"]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    messages: _containers.RepeatedCompositeFieldContainer[AppendedMessage]
    next_sequence: int
    def __init__(self, messages: _Optional[_Iterable[_Union[AppendedMessage, _Mapping]]] = ..., duplicate: bool = ..., next_sequence: _Optional[int] = ...) -> None: ...

class AppendStreamResponse(_message.Message):
    __slots__ = ["error", "response"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    response: AppendResponse
    def __init__(self, response: _Optional[_Union[AppendResponse, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class AppendedMessage(_message.Message):
    __slots__ = ["created_at", "kept", "message_id", "sequence"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    kept: bool
    message_id: str
    sequence: int
    def __init__(self, message_id: _Optional[str] = ..., sequence: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., kept: bool = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["actor_name", "automation", "client_key", "expires_at", "metadata_json", "namespace", "scope_deltas", "session_id", "state_delta", "ttl"]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    AUTOMATION_FIELD_NUMBER: _ClassVar[int]
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_DELTAS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_DELTA_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    actor_name: str
    automation: str
    client_key: str
    expires_at: _timestamp_pb2.Timestamp
    metadata_json: str
    namespace: str
    scope_deltas: _containers.RepeatedCompositeFieldContainer[ScopeDelta]
    session_id: str
    state_delta: StateDelta
    ttl: _duration_pb2.Duration
    def __init__(self, session_id: _Optional[str] = ..., actor_name: _Optional[str] = ..., namespace: _Optional[str] = ..., automation: _Optional[str] = ..., metadata_json: _Optional[str] = ..., client_key: _Optional[str] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., state_delta: _Optional[_Union[StateDelta, _Mapping]] = ..., scope_deltas: _Optional[_Iterable[_Union[ScopeDelta, _Mapping]]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["created", "session"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    created: bool
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ..., created: bool = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["only_if_expired", "session_id"]
    ONLY_IF_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    only_if_expired: bool
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., only_if_expired: bool = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ["messages_removed", "plans_orphaned"]
    MESSAGES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    PLANS_ORPHANED_FIELD_NUMBER: _ClassVar[int]
    messages_removed: int
    plans_orphaned: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, messages_removed: _Optional[int] = ..., plans_orphaned: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteSessionsRequest(_message.Message):
    __slots__ = ["client_key_prefix", "namespace"]
    CLIENT_KEY_PREFIX_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    client_key_prefix: str
    namespace: str
    def __init__(self, namespace: _Optional[str] = ..., client_key_prefix: _Optional[str] = ...) -> None: ...

class DeleteSessionsResponse(_message.Message):
    __slots__ = ["messages_removed", "session_ids"]
    MESSAGES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    messages_removed: int
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_ids: _Optional[_Iterable[str]] = ..., messages_removed: _Optional[int] = ...) -> None: ...

class DeleteSnapshotRequest(_message.Message):
    __slots__ = ["session_id", "through_sequence"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    through_sequence: int
    def __init__(self, session_id: _Optional[str] = ..., through_sequence: _Optional[int] = ...) -> None: ...

class DeleteSnapshotResponse(_message.Message):
    __slots__ = ["deleted"]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: bool = ...) -> None: ...

class ExportChunk(_message.Message):
    __slots__ = ["header", "page", "trailer"]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    TRAILER_FIELD_NUMBER: _ClassVar[int]
    header: ExportHeader
    page: ExportPage
    trailer: ExportTrailer
    def __init__(self, header: _Optional[_Union[ExportHeader, _Mapping]] = ..., page: _Optional[_Union[ExportPage, _Mapping]] = ..., trailer: _Optional[_Union[ExportTrailer, _Mapping]] = ...) -> None: ...

class ExportHeader(_message.Message):
    __slots__ = ["schema_version", "session", "snapshot", "state_json"]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    schema_version: str
    session: Session
    snapshot: Snapshot
    state_json: str
    def __init__(self, schema_version: _Optional[str] = ..., session: _Optional[_Union[Session, _Mapping]] = ..., state_json: _Optional[str] = ..., snapshot: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class ExportPage(_message.Message):
    __slots__ = ["messages"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class ExportSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ExportSessionResponse(_message.Message):
    __slots__ = ["checksum", "data"]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    checksum: str
    data: str
    def __init__(self, data: _Optional[str] = ..., checksum: _Optional[str] = ...) -> None: ...

class ExportTrailer(_message.Message):
    __slots__ = ["checksum"]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    checksum: str
    def __init__(self, checksum: _Optional[str] = ...) -> None: ...

class GetItemRequest(_message.Message):
    __slots__ = ["item_key", "session_id"]
    ITEM_KEY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    item_key: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., item_key: _Optional[str] = ...) -> None: ...

class GetItemResponse(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: Message
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["client_key", "namespace", "session_id"]
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    client_key: str
    namespace: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., namespace: _Optional[str] = ..., client_key: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class GetSnapshotRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSnapshotResponse(_message.Message):
    __slots__ = ["snapshot"]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: Snapshot
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class GetStateRequest(_message.Message):
    __slots__ = ["scopes", "session_id"]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    scopes: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ...) -> None: ...

class GetStateResponse(_message.Message):
    __slots__ = ["next_sequence", "scopes", "state_json"]
    NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    next_sequence: int
    scopes: _containers.RepeatedCompositeFieldContainer[ScopeState]
    state_json: str
    def __init__(self, state_json: _Optional[str] = ..., next_sequence: _Optional[int] = ..., scopes: _Optional[_Iterable[_Union[ScopeState, _Mapping]]] = ...) -> None: ...

class ImportChunk(_message.Message):
    __slots__ = ["header", "page", "trailer"]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    TRAILER_FIELD_NUMBER: _ClassVar[int]
    header: ExportHeader
    page: ExportPage
    trailer: ExportTrailer
    def __init__(self, header: _Optional[_Union[ExportHeader, _Mapping]] = ..., page: _Optional[_Union[ExportPage, _Mapping]] = ..., trailer: _Optional[_Union[ExportTrailer, _Mapping]] = ...) -> None: ...

class ImportSessionRequest(_message.Message):
    __slots__ = ["data"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: str
    def __init__(self, data: _Optional[str] = ...) -> None: ...

class ImportSessionResponse(_message.Message):
    __slots__ = ["checksum", "messages_imported", "session"]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_IMPORTED_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    checksum: str
    messages_imported: int
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ..., messages_imported: _Optional[int] = ..., checksum: _Optional[str] = ...) -> None: ...

class LinkPlanRequest(_message.Message):
    __slots__ = ["plan", "session_id"]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    plan: LinkedPlan
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., plan: _Optional[_Union[LinkedPlan, _Mapping]] = ...) -> None: ...

class LinkPlanResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class LinkedPlan(_message.Message):
    __slots__ = ["phase", "plan_id", "state"]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    phase: str
    plan_id: str
    state: str
    def __init__(self, plan_id: _Optional[str] = ..., phase: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class ListItemsRequest(_message.Message):
    __slots__ = ["cursor_sequence", "key_prefix", "kind", "limit", "newest_first", "session_id"]
    CURSOR_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    KEY_PREFIX_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    cursor_sequence: int
    key_prefix: str
    kind: str
    limit: int
    newest_first: bool
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., kind: _Optional[str] = ..., key_prefix: _Optional[str] = ..., newest_first: bool = ..., limit: _Optional[int] = ..., cursor_sequence: _Optional[int] = ...) -> None: ...

class ListItemsResponse(_message.Message):
    __slots__ = ["messages", "next_cursor_sequence"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    next_cursor_sequence: int
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., next_cursor_sequence: _Optional[int] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ["after_time", "before_time", "from_sequence", "last", "limit", "session_id"]
    AFTER_TIME_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TIME_FIELD_NUMBER: _ClassVar[int]
    FROM_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    after_time: _timestamp_pb2.Timestamp
    before_time: _timestamp_pb2.Timestamp
    from_sequence: int
    last: int
    limit: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., from_sequence: _Optional[int] = ..., limit: _Optional[int] = ..., after_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., before_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last: _Optional[int] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ["messages", "next_sequence"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    next_sequence: int
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., next_sequence: _Optional[int] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["actor_name", "cursor", "limit", "namespace", "state"]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    actor_name: str
    cursor: str
    limit: int
    namespace: str
    state: SessionState
    def __init__(self, actor_name: _Optional[str] = ..., namespace: _Optional[str] = ..., state: _Optional[_Union[SessionState, str]] = ..., limit: _Optional[int] = ..., cursor: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_cursor", "sessions"]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_cursor: str
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["content", "created_at", "event_time", "item_key", "kind", "message_id", "metadata_json", "role", "sequence", "session_id"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    ITEM_KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    content: str
    created_at: _timestamp_pb2.Timestamp
    event_time: _timestamp_pb2.Timestamp
    item_key: str
    kind: str
    message_id: str
    metadata_json: str
    role: Role
    sequence: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., message_id: _Optional[str] = ..., sequence: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., content: _Optional[str] = ..., metadata_json: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., event_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., item_key: _Optional[str] = ..., kind: _Optional[str] = ...) -> None: ...

class NewMessage(_message.Message):
    __slots__ = ["content", "event_time", "item_key", "kind", "message_id", "metadata_json", "on_key_conflict", "role"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    ITEM_KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    ON_KEY_CONFLICT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    content: str
    event_time: _timestamp_pb2.Timestamp
    item_key: str
    kind: str
    message_id: str
    metadata_json: str
    on_key_conflict: KeyConflict
    role: Role
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., content: _Optional[str] = ..., metadata_json: _Optional[str] = ..., message_id: _Optional[str] = ..., event_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., item_key: _Optional[str] = ..., kind: _Optional[str] = ..., on_key_conflict: _Optional[_Union[KeyConflict, str]] = ...) -> None: ...

class PutSnapshotRequest(_message.Message):
    __slots__ = ["data", "sequence", "session_id"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    sequence: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., sequence: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class PutSnapshotResponse(_message.Message):
    __slots__ = ["snapshot"]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: Snapshot
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class ReplaceSuffixRequest(_message.Message):
    __slots__ = ["expected_next_sequence", "from_sequence", "messages", "remove_last", "scope_deltas", "session_id", "state_delta"]
    EXPECTED_NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FROM_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_LAST_FIELD_NUMBER: _ClassVar[int]
    SCOPE_DELTAS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_DELTA_FIELD_NUMBER: _ClassVar[int]
    expected_next_sequence: int
    from_sequence: int
    messages: _containers.RepeatedCompositeFieldContainer[NewMessage]
    remove_last: int
    scope_deltas: _containers.RepeatedCompositeFieldContainer[ScopeDelta]
    session_id: str
    state_delta: StateDelta
    def __init__(self, session_id: _Optional[str] = ..., from_sequence: _Optional[int] = ..., remove_last: _Optional[int] = ..., expected_next_sequence: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[NewMessage, _Mapping]]] = ..., state_delta: _Optional[_Union[StateDelta, _Mapping]] = ..., scope_deltas: _Optional[_Iterable[_Union[ScopeDelta, _Mapping]]] = ...) -> None: ...

class ReplaceSuffixResponse(_message.Message):
    __slots__ = ["duplicate", "messages", "next_sequence", "removed"]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    messages: _containers.RepeatedCompositeFieldContainer[AppendedMessage]
    next_sequence: int
    removed: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, removed: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., messages: _Optional[_Iterable[_Union[AppendedMessage, _Mapping]]] = ..., next_sequence: _Optional[int] = ..., duplicate: bool = ...) -> None: ...

class ScopeDelta(_message.Message):
    __slots__ = ["delta", "scope"]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    delta: StateDelta
    scope: str
    def __init__(self, scope: _Optional[str] = ..., delta: _Optional[_Union[StateDelta, _Mapping]] = ...) -> None: ...

class ScopeState(_message.Message):
    __slots__ = ["scope", "state_json", "updated_at"]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    scope: str
    state_json: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, scope: _Optional[str] = ..., state_json: _Optional[str] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SequenceMismatch(_message.Message):
    __slots__ = ["expected_next_sequence", "next_sequence", "session_id"]
    EXPECTED_NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    expected_next_sequence: int
    next_sequence: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., expected_next_sequence: _Optional[int] = ..., next_sequence: _Optional[int] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["actor_name", "automation", "client_key", "closed_at", "created_at", "expires_at", "first_sequence", "linked_plans", "message_count", "metadata_json", "namespace", "session_id", "state", "token_usage", "updated_at"]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    AUTOMATION_FIELD_NUMBER: _ClassVar[int]
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    CLOSED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LINKED_PLANS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_USAGE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    actor_name: str
    automation: str
    client_key: str
    closed_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    first_sequence: int
    linked_plans: _containers.RepeatedCompositeFieldContainer[LinkedPlan]
    message_count: int
    metadata_json: str
    namespace: str
    session_id: str
    state: SessionState
    token_usage: TokenUsage
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, session_id: _Optional[str] = ..., actor_name: _Optional[str] = ..., namespace: _Optional[str] = ..., automation: _Optional[str] = ..., metadata_json: _Optional[str] = ..., state: _Optional[_Union[SessionState, str]] = ..., token_usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., linked_plans: _Optional[_Iterable[_Union[LinkedPlan, _Mapping]]] = ..., message_count: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., closed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., client_key: _Optional[str] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., first_sequence: _Optional[int] = ...) -> None: ...

class SetExpiryRequest(_message.Message):
    __slots__ = ["clear", "expires_at", "session_id", "ttl"]
    CLEAR_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    clear: bool
    expires_at: _timestamp_pb2.Timestamp
    session_id: str
    ttl: _duration_pb2.Duration
    def __init__(self, session_id: _Optional[str] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., clear: bool = ...) -> None: ...

class SetExpiryResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ["created_at", "data", "sequence"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    data: bytes
    sequence: int
    def __init__(self, sequence: _Optional[int] = ..., data: _Optional[bytes] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StateDelta(_message.Message):
    __slots__ = ["delete", "set_json"]
    class SetJsonEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DELETE_FIELD_NUMBER: _ClassVar[int]
    SET_JSON_FIELD_NUMBER: _ClassVar[int]
    delete: _containers.RepeatedScalarFieldContainer[str]
    set_json: _containers.ScalarMap[str, str]
    def __init__(self, set_json: _Optional[_Mapping[str, str]] = ..., delete: _Optional[_Iterable[str]] = ...) -> None: ...

class TaggedAppend(_message.Message):
    __slots__ = ["request", "tag"]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    request: AppendRequest
    tag: int
    def __init__(self, tag: _Optional[int] = ..., request: _Optional[_Union[AppendRequest, _Mapping]] = ...) -> None: ...

class TaggedOutcome(_message.Message):
    __slots__ = ["outcome", "tag"]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    outcome: AppendStreamResponse
    tag: int
    def __init__(self, tag: _Optional[int] = ..., outcome: _Optional[_Union[AppendStreamResponse, _Mapping]] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ["cost", "input_tokens", "output_tokens"]
    COST_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cost: float
    input_tokens: int
    output_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost: _Optional[float] = ...) -> None: ...

class TruncateRequest(_message.Message):
    __slots__ = ["session_id", "through_sequence"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    through_sequence: int
    def __init__(self, session_id: _Optional[str] = ..., through_sequence: _Optional[int] = ...) -> None: ...

class TruncateResponse(_message.Message):
    __slots__ = ["first_sequence", "messages_removed"]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    first_sequence: int
    messages_removed: int
    def __init__(self, messages_removed: _Optional[int] = ..., first_sequence: _Optional[int] = ...) -> None: ...

class UpdateScopesRequest(_message.Message):
    __slots__ = ["request_id", "scope_deltas"]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_DELTAS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    scope_deltas: _containers.RepeatedCompositeFieldContainer[ScopeDelta]
    def __init__(self, scope_deltas: _Optional[_Iterable[_Union[ScopeDelta, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class UpdateScopesResponse(_message.Message):
    __slots__ = ["duplicate", "scopes"]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    scopes: _containers.RepeatedCompositeFieldContainer[ScopeState]
    def __init__(self, scopes: _Optional[_Iterable[_Union[ScopeState, _Mapping]]] = ..., duplicate: bool = ...) -> None: ...

class UpdateStateRequest(_message.Message):
    __slots__ = ["expected_next_sequence", "scope_deltas", "session_id", "state_delta"]
    EXPECTED_NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_DELTAS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_DELTA_FIELD_NUMBER: _ClassVar[int]
    expected_next_sequence: int
    scope_deltas: _containers.RepeatedCompositeFieldContainer[ScopeDelta]
    session_id: str
    state_delta: StateDelta
    def __init__(self, session_id: _Optional[str] = ..., state_delta: _Optional[_Union[StateDelta, _Mapping]] = ..., scope_deltas: _Optional[_Iterable[_Union[ScopeDelta, _Mapping]]] = ..., expected_next_sequence: _Optional[int] = ...) -> None: ...

class UpdateStateResponse(_message.Message):
    __slots__ = ["next_sequence", "state_json"]
    NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    next_sequence: int
    state_json: str
    def __init__(self, state_json: _Optional[str] = ..., next_sequence: _Optional[int] = ...) -> None: ...

class UpdateTokenUsageRequest(_message.Message):
    __slots__ = ["cost", "input_tokens", "output_tokens", "session_id"]
    COST_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    cost: float
    input_tokens: int
    output_tokens: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost: _Optional[float] = ...) -> None: ...

class UpdateTokenUsageResponse(_message.Message):
    __slots__ = ["total"]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    total: TokenUsage
    def __init__(self, total: _Optional[_Union[TokenUsage, _Mapping]] = ...) -> None: ...

class SessionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class KeyConflict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

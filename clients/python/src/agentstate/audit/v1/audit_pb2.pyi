from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AuditEntry(_message.Message):
    __slots__ = ["actor_name", "created_at", "details_json", "event_id", "event_type", "hash", "namespace", "plan_id", "position", "prev_hash", "principal", "project_name", "session_id", "user_identity"]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    PREV_HASH_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    PROJECT_NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    actor_name: str
    created_at: _timestamp_pb2.Timestamp
    details_json: str
    event_id: str
    event_type: str
    hash: str
    namespace: str
    plan_id: str
    position: int
    prev_hash: str
    principal: str
    project_name: str
    session_id: str
    user_identity: str
    def __init__(self, event_id: _Optional[str] = ..., event_type: _Optional[str] = ..., plan_id: _Optional[str] = ..., session_id: _Optional[str] = ..., project_name: _Optional[str] = ..., actor_name: _Optional[str] = ..., user_identity: _Optional[str] = ..., details_json: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., position: _Optional[int] = ..., hash: _Optional[str] = ..., prev_hash: _Optional[str] = ..., principal: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class CountRequest(_message.Message):
    __slots__ = ["filter"]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: Filter
    def __init__(self, filter: _Optional[_Union[Filter, _Mapping]] = ...) -> None: ...

class CountResponse(_message.Message):
    __slots__ = ["count"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class Filter(_message.Message):
    __slots__ = ["actor_name", "event_type", "namespace", "plan_id", "principal", "session_id", "since", "until"]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    actor_name: str
    event_type: str
    namespace: str
    plan_id: str
    principal: str
    session_id: str
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    def __init__(self, event_type: _Optional[str] = ..., plan_id: _Optional[str] = ..., session_id: _Optional[str] = ..., actor_name: _Optional[str] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., principal: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class FlushRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class FlushResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ["event_id"]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    def __init__(self, event_id: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ["entry"]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    entry: AuditEntry
    def __init__(self, entry: _Optional[_Union[AuditEntry, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ["after_event_id", "filter", "limit"]
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after_event_id: str
    filter: Filter
    limit: int
    def __init__(self, filter: _Optional[_Union[Filter, _Mapping]] = ..., after_event_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ["entries", "next_cursor"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AuditEntry]
    next_cursor: str
    def __init__(self, entries: _Optional[_Iterable[_Union[AuditEntry, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class PruneRequest(_message.Message):
    __slots__ = ["older_than"]
    OLDER_THAN_FIELD_NUMBER: _ClassVar[int]
    older_than: _timestamp_pb2.Timestamp
    def __init__(self, older_than: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PruneResponse(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class RecordRequest(_message.Message):
    __slots__ = ["actor_name", "details_json", "event_id", "event_type", "plan_id", "project_name", "session_id", "sync", "user_identity"]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SYNC_FIELD_NUMBER: _ClassVar[int]
    USER_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    actor_name: str
    details_json: str
    event_id: str
    event_type: str
    plan_id: str
    project_name: str
    session_id: str
    sync: bool
    user_identity: str
    def __init__(self, event_type: _Optional[str] = ..., plan_id: _Optional[str] = ..., session_id: _Optional[str] = ..., project_name: _Optional[str] = ..., actor_name: _Optional[str] = ..., user_identity: _Optional[str] = ..., details_json: _Optional[str] = ..., sync: bool = ..., event_id: _Optional[str] = ...) -> None: ...

class RecordResponse(_message.Message):
    __slots__ = ["duplicate", "durable", "entry"]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    durable: bool
    entry: AuditEntry
    def __init__(self, entry: _Optional[_Union[AuditEntry, _Mapping]] = ..., durable: bool = ..., duplicate: bool = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ["entries_checked", "first_broken_event_id", "ok", "reason"]
    ENTRIES_CHECKED_FIELD_NUMBER: _ClassVar[int]
    FIRST_BROKEN_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    entries_checked: int
    first_broken_event_id: str
    ok: bool
    reason: str
    def __init__(self, ok: bool = ..., entries_checked: _Optional[int] = ..., first_broken_event_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

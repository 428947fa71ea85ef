from agentstate.audit.v1 import audit_pb2 as _audit_pb2
from agentstate.common.v1 import common_pb2 as _common_pb2
from agentstate.session.v1 import session_pb2 as _session_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Ack(_message.Message):
    __slots__ = ["events", "subscription_id"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    events: int
    subscription_id: str
    def __init__(self, subscription_id: _Optional[str] = ..., events: _Optional[int] = ...) -> None: ...

class ChangeEvent(_message.Message):
    __slots__ = ["ended", "entry", "pruned", "subscription_id"]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    PRUNED_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    ended: ChangesEnded
    entry: _audit_pb2.AuditEntry
    pruned: Pruned
    subscription_id: str
    def __init__(self, entry: _Optional[_Union[_audit_pb2.AuditEntry, _Mapping]] = ..., pruned: _Optional[_Union[Pruned, _Mapping]] = ..., ended: _Optional[_Union[ChangesEnded, _Mapping]] = ..., subscription_id: _Optional[str] = ...) -> None: ...

class ChangeFilter(_message.Message):
    __slots__ = ["actor_name", "event_types", "namespace", "plan_id", "principal", "session_id"]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    actor_name: str
    event_types: _containers.RepeatedScalarFieldContainer[str]
    namespace: str
    plan_id: str
    principal: str
    session_id: str
    def __init__(self, event_types: _Optional[_Iterable[str]] = ..., session_id: _Optional[str] = ..., plan_id: _Optional[str] = ..., actor_name: _Optional[str] = ..., principal: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class ChangesEnded(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Pruned(_message.Message):
    __slots__ = ["after_position", "to_position"]
    AFTER_POSITION_FIELD_NUMBER: _ClassVar[int]
    TO_POSITION_FIELD_NUMBER: _ClassVar[int]
    after_position: int
    to_position: int
    def __init__(self, after_position: _Optional[int] = ..., to_position: _Optional[int] = ...) -> None: ...

class Rewound(_message.Message):
    __slots__ = ["from_sequence", "previous_next_sequence"]
    FROM_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    from_sequence: int
    previous_next_sequence: int
    def __init__(self, from_sequence: _Optional[int] = ..., previous_next_sequence: _Optional[int] = ...) -> None: ...

class SessionEnded(_message.Message):
    __slots__ = ["reason"]
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    REASON_CLOSED: SessionEnded.Reason
    REASON_DELETED: SessionEnded.Reason
    REASON_FIELD_NUMBER: _ClassVar[int]
    REASON_NODE_STOPPING: SessionEnded.Reason
    REASON_UNSPECIFIED: SessionEnded.Reason
    reason: SessionEnded.Reason
    def __init__(self, reason: _Optional[_Union[SessionEnded.Reason, str]] = ...) -> None: ...

class SessionEvent(_message.Message):
    __slots__ = ["ended", "message", "rewound", "subscription_id", "truncated"]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REWOUND_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    ended: SessionEnded
    message: _session_pb2.Message
    rewound: Rewound
    subscription_id: str
    truncated: Truncated
    def __init__(self, message: _Optional[_Union[_session_pb2.Message, _Mapping]] = ..., truncated: _Optional[_Union[Truncated, _Mapping]] = ..., ended: _Optional[_Union[SessionEnded, _Mapping]] = ..., rewound: _Optional[_Union[Rewound, _Mapping]] = ..., subscription_id: _Optional[str] = ...) -> None: ...

class Subscribed(_message.Message):
    __slots__ = ["subscription_id"]
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    def __init__(self, subscription_id: _Optional[str] = ...) -> None: ...

class SubscriptionFailed(_message.Message):
    __slots__ = ["error", "subscription_id"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    subscription_id: str
    def __init__(self, subscription_id: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class TailChangesRequest(_message.Message):
    __slots__ = ["after_position", "filter", "from_now", "window"]
    AFTER_POSITION_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    FROM_NOW_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    after_position: int
    filter: ChangeFilter
    from_now: bool
    window: int
    def __init__(self, filter: _Optional[_Union[ChangeFilter, _Mapping]] = ..., after_position: _Optional[int] = ..., from_now: bool = ..., window: _Optional[int] = ...) -> None: ...

class TailSessionRequest(_message.Message):
    __slots__ = ["from_now", "from_sequence", "session_id", "window"]
    FROM_NOW_FIELD_NUMBER: _ClassVar[int]
    FROM_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    from_now: bool
    from_sequence: int
    session_id: str
    window: int
    def __init__(self, session_id: _Optional[str] = ..., from_sequence: _Optional[int] = ..., from_now: bool = ..., window: _Optional[int] = ...) -> None: ...

class Truncated(_message.Message):
    __slots__ = ["from_sequence", "to_sequence"]
    FROM_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TO_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    from_sequence: int
    to_sequence: int
    def __init__(self, from_sequence: _Optional[int] = ..., to_sequence: _Optional[int] = ...) -> None: ...

class Unsubscribe(_message.Message):
    __slots__ = ["subscription_id"]
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    def __init__(self, subscription_id: _Optional[str] = ...) -> None: ...

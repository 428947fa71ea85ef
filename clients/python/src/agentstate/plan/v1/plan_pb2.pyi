from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ERROR_CATEGORY_AUTH: ErrorCategory
ERROR_CATEGORY_INTERNAL: ErrorCategory
ERROR_CATEGORY_MERGE_CONFLICT: ErrorCategory
ERROR_CATEGORY_RESOURCE: ErrorCategory
ERROR_CATEGORY_STRATEGY_CONSTRAINT: ErrorCategory
ERROR_CATEGORY_TOOL: ErrorCategory
ERROR_CATEGORY_TRANSIENT: ErrorCategory
ERROR_CATEGORY_UNKNOWN: ErrorCategory
ERROR_CATEGORY_UNSPECIFIED: ErrorCategory
ERROR_CATEGORY_VALIDATION: ErrorCategory
PHASE_ACTION: Phase
PHASE_APPLY: Phase
PHASE_EXECUTE: Phase
PHASE_STRATEGIZE: Phase
PHASE_UNSPECIFIED: Phase
RECOVERY_ACTION_ABORT: RecoveryAction
RECOVERY_ACTION_ESCALATE: RecoveryAction
RECOVERY_ACTION_PROMPT: RecoveryAction
RECOVERY_ACTION_RETRY: RecoveryAction
RECOVERY_ACTION_REVERT_TO_STRATEGIZE: RecoveryAction
RECOVERY_ACTION_UNSPECIFIED: RecoveryAction

class ErrorDetails(_message.Message):
    __slots__ = ["error_category", "error_phase", "is_retriable", "max_retries", "recovery_action", "recovery_command", "recovery_hint", "retry_count"]
    ERROR_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    ERROR_PHASE_FIELD_NUMBER: _ClassVar[int]
    IS_RETRIABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_ACTION_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_COMMAND_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_HINT_FIELD_NUMBER: _ClassVar[int]
    RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    error_category: ErrorCategory
    error_phase: Phase
    is_retriable: bool
    max_retries: int
    recovery_action: RecoveryAction
    recovery_command: str
    recovery_hint: str
    retry_count: int
    def __init__(self, error_category: _Optional[_Union[ErrorCategory, str]] = ..., error_phase: _Optional[_Union[Phase, str]] = ..., retry_count: _Optional[int] = ..., max_retries: _Optional[int] = ..., is_retriable: bool = ..., recovery_action: _Optional[_Union[RecoveryAction, str]] = ..., recovery_hint: _Optional[str] = ..., recovery_command: _Optional[str] = ...) -> None: ...

class ErrorDetailsRequest(_message.Message):
    __slots__ = ["namespace", "plan_id"]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    plan_id: str
    def __init__(self, plan_id: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class ErrorDetailsResponse(_message.Message):
    __slots__ = ["details", "details_json", "max_retries"]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    details: ErrorDetails
    details_json: str
    max_retries: int
    def __init__(self, details: _Optional[_Union[ErrorDetails, _Mapping]] = ..., details_json: _Optional[str] = ..., max_retries: _Optional[int] = ...) -> None: ...

class ErrorRecord(_message.Message):
    __slots__ = ["actor_name", "attributes_json", "category", "error_type", "is_retriable", "max_retries", "message", "namespace", "phase", "plan_id", "record_id", "recorded_at", "recovery_action", "recovery_command", "recovery_hint", "retry_count", "sequence", "stack_summary", "step_id", "tool"]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_JSON_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    IS_RETRIABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_ACTION_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_COMMAND_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_HINT_FIELD_NUMBER: _ClassVar[int]
    RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    STACK_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    actor_name: str
    attributes_json: str
    category: ErrorCategory
    error_type: str
    is_retriable: bool
    max_retries: int
    message: str
    namespace: str
    phase: Phase
    plan_id: str
    record_id: str
    recorded_at: _timestamp_pb2.Timestamp
    recovery_action: RecoveryAction
    recovery_command: str
    recovery_hint: str
    retry_count: int
    sequence: int
    stack_summary: str
    step_id: str
    tool: str
    def __init__(self, record_id: _Optional[str] = ..., plan_id: _Optional[str] = ..., sequence: _Optional[int] = ..., phase: _Optional[_Union[Phase, str]] = ..., step_id: _Optional[str] = ..., error_type: _Optional[str] = ..., message: _Optional[str] = ..., tool: _Optional[str] = ..., actor_name: _Optional[str] = ..., stack_summary: _Optional[str] = ..., attributes_json: _Optional[str] = ..., category: _Optional[_Union[ErrorCategory, str]] = ..., is_retriable: bool = ..., retry_count: _Optional[int] = ..., max_retries: _Optional[int] = ..., recovery_action: _Optional[_Union[RecoveryAction, str]] = ..., recovery_hint: _Optional[str] = ..., recovery_command: _Optional[str] = ..., recorded_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., namespace: _Optional[str] = ...) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ["category", "from_sequence", "limit", "namespace", "phase", "plan_id"]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    FROM_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    category: ErrorCategory
    from_sequence: int
    limit: int
    namespace: str
    phase: Phase
    plan_id: str
    def __init__(self, plan_id: _Optional[str] = ..., phase: _Optional[_Union[Phase, str]] = ..., category: _Optional[_Union[ErrorCategory, str]] = ..., from_sequence: _Optional[int] = ..., limit: _Optional[int] = ..., namespace: _Optional[str] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ["next_sequence", "records"]
    NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    next_sequence: int
    records: _containers.RepeatedCompositeFieldContainer[ErrorRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[ErrorRecord, _Mapping]]] = ..., next_sequence: _Optional[int] = ...) -> None: ...

class MergeErrorDetailsRequest(_message.Message):
    __slots__ = ["details_json", "namespace", "plan_id"]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    details_json: str
    namespace: str
    plan_id: str
    def __init__(self, plan_id: _Optional[str] = ..., details_json: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class MergeErrorDetailsResponse(_message.Message):
    __slots__ = ["details_json"]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    details_json: str
    def __init__(self, details_json: _Optional[str] = ...) -> None: ...

class RecordErrorRequest(_message.Message):
    __slots__ = ["actor_name", "attributes_json", "error_type", "message", "namespace", "phase", "plan_id", "record_id", "stack_summary", "step_id", "tool"]
    ACTOR_NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    STACK_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    actor_name: str
    attributes_json: str
    error_type: str
    message: str
    namespace: str
    phase: Phase
    plan_id: str
    record_id: str
    stack_summary: str
    step_id: str
    tool: str
    def __init__(self, plan_id: _Optional[str] = ..., phase: _Optional[_Union[Phase, str]] = ..., step_id: _Optional[str] = ..., error_type: _Optional[str] = ..., message: _Optional[str] = ..., tool: _Optional[str] = ..., actor_name: _Optional[str] = ..., stack_summary: _Optional[str] = ..., attributes_json: _Optional[str] = ..., record_id: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class RecordErrorResponse(_message.Message):
    __slots__ = ["duplicate", "record"]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    record: ErrorRecord
    def __init__(self, record: _Optional[_Union[ErrorRecord, _Mapping]] = ..., duplicate: bool = ...) -> None: ...

class RecordSuccessRequest(_message.Message):
    __slots__ = ["namespace", "phase", "plan_id", "step_id"]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    phase: Phase
    plan_id: str
    step_id: str
    def __init__(self, plan_id: _Optional[str] = ..., phase: _Optional[_Union[Phase, str]] = ..., step_id: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class RecordSuccessResponse(_message.Message):
    __slots__ = ["previous_retry_count"]
    PREVIOUS_RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    previous_retry_count: int
    def __init__(self, previous_retry_count: _Optional[int] = ...) -> None: ...

class SetPolicyRequest(_message.Message):
    __slots__ = ["max_retries", "namespace", "plan_id"]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    max_retries: int
    namespace: str
    plan_id: str
    def __init__(self, plan_id: _Optional[str] = ..., max_retries: _Optional[int] = ..., namespace: _Optional[str] = ...) -> None: ...

class SetPolicyResponse(_message.Message):
    __slots__ = ["max_retries", "plan_id"]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    max_retries: int
    plan_id: str
    def __init__(self, plan_id: _Optional[str] = ..., max_retries: _Optional[int] = ...) -> None: ...

class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ErrorCategory(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class RecoveryAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

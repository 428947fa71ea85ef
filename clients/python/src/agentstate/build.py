"""Request building shared by the blocking and the asyncio clients.

Ids a retry must repeat (message ids, a created session's id, a plan error's
record id) are chosen here, before the first attempt, so that every attempt
of one call carries the same ones.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Optional, Tuple, Union

from google.protobuf.timestamp_pb2 import Timestamp

from agentstate import ids, wire
from agentstate.audit.v1 import audit_pb2
from agentstate.errors import InvalidArgument
from agentstate.plan.v1 import plan_pb2
from agentstate.session.v1 import session_pb2

# A message of an append: a NewMessage, or (role, content), or
# (role, content, metadata). A role is a name ("user") or a session_pb2.Role.
MessageLike = Union[
    session_pb2.NewMessage,
    Tuple[Union[str, int], str],
    Tuple[Union[str, int], str, Optional[Mapping[str, Any]]],
]
JSONObject = Union[Mapping[str, Any], str, None]
# A change of a state: a StateDelta, or a mapping of keys to the values to
# set (any JSON-encodable value). Deletions need state_delta(delete=...).
StateDeltaLike = Union[session_pb2.StateDelta, Mapping[str, Any], None]
# Changes of shared scopes, by scope name ("app:myapp").
ScopesLike = Optional[Mapping[str, Union[session_pb2.StateDelta, Mapping[str, Any]]]]


def json_object(value: JSONObject, field: str) -> str:
    """A JSON object as the node wants it: a dict is encoded, a str passed on, None is ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{field} must be a mapping (a JSON object), not {type(value).__name__}")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_ENUM_CACHE: dict = {}


def enum_value(enum: Any, prefix: str, value: Union[str, int, None]) -> Any:
    """An enum number from its number, its full name or its short name ("user" for ROLE_USER).

    Typed Any because the generated stubs type enum fields by enum class,
    whose values are plain ints at run time.
    """
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    key = (prefix, value)
    found = _ENUM_CACHE.get(key)
    if found is not None:
        return found
    name = value.upper()
    if not name.startswith(prefix):
        name = prefix + name
    try:
        number = int(enum.Value(name))
    except ValueError:
        names = ", ".join(n[len(prefix):].lower() for n in enum.keys()[1:])
        raise InvalidArgument(f"unknown {prefix.rstrip('_').lower()} {value!r}; want one of {names}") from None
    # Names are few and fixed; caching them saves a lookup on every message.
    _ENUM_CACHE[key] = number
    return number


def new_message(
    role: Union[str, int],
    content: str,
    metadata: JSONObject = None,
    message_id: Optional[str] = None,
    *,
    item_key: str = "",
    kind: str = "",
    keep_stored: bool = False,
) -> session_pb2.NewMessage:
    """One message of an append; message_id defaults to a new ULID.

    item_key (unique in the session) and kind make it a keyed item, read by
    Sessions.get_item and list_items. keep_stored: if the session holds
    item_key already, the append keeps that message (its AppendedMessage is
    kept=True) and stores the turn's other messages; otherwise the whole
    append is AlreadyExists.
    """
    return session_pb2.NewMessage(
        role=enum_value(session_pb2.Role, "ROLE_", role),
        content=content,
        metadata_json=json_object(metadata, "metadata"),
        message_id=message_id or ids.new_ulid(),
        item_key=item_key,
        kind=kind,
        on_key_conflict=session_pb2.KEY_CONFLICT_KEEP_STORED if keep_stored else session_pb2.KEY_CONFLICT_UNSPECIFIED,
    )


def list_items_request(
    session_id: str, kind: str, key_prefix: str, newest_first: bool, limit: int, cursor_sequence: Optional[int]
) -> session_pb2.ListItemsRequest:
    req = session_pb2.ListItemsRequest(
        session_id=session_id, kind=kind, key_prefix=key_prefix, newest_first=newest_first, limit=limit
    )
    if cursor_sequence is not None:
        req.cursor_sequence = cursor_sequence
    return req


def state_delta(set: Optional[Mapping[str, Any]] = None, delete: Iterable[str] = ()) -> session_pb2.StateDelta:
    """A change of a state: each key of set becomes its value (encoded as JSON), then each key of delete is removed."""
    d = session_pb2.StateDelta(delete=_keys(delete, "delete"))
    for k, v in (set or {}).items():
        if not isinstance(k, str):
            raise InvalidArgument(f"a state key is a str, not {type(k).__name__}")
        try:
            d.set_json[k] = json.dumps(v, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidArgument(f"state key {k!r}: value is not JSON: {e}") from None
    return d


def _keys(keys: Iterable[str], field: str) -> list:
    if isinstance(keys, str):
        raise InvalidArgument(f"{field} is a list of keys, not a str")
    return list(keys)


def _delta(value: StateDeltaLike) -> Optional[session_pb2.StateDelta]:
    if value is None or isinstance(value, session_pb2.StateDelta):
        return value
    if isinstance(value, Mapping):
        return state_delta(set=value)
    raise InvalidArgument(f"a state change is a StateDelta or a mapping of keys to set, not {type(value).__name__}")


def scope_deltas(scopes: ScopesLike) -> list:
    """The ScopeDeltas of a mapping of scope names to their changes."""
    if scopes is None:
        return []
    if not isinstance(scopes, Mapping):
        raise InvalidArgument(f"scopes is a mapping of scope names to changes, not {type(scopes).__name__}")
    return [session_pb2.ScopeDelta(scope=name, delta=_delta(d)) for name, d in scopes.items()]


def _expect(expect: Optional[int]) -> Optional[int]:
    # The node refuses a negative one too; refused here, it is not even sent.
    if expect is not None and (not isinstance(expect, int) or isinstance(expect, bool) or expect < 0):
        raise InvalidArgument(f"expect must be a sequence (an int >= 0), not {expect!r}")
    return expect


def get_state_request(session_id: str, scopes: Iterable[str]) -> session_pb2.GetStateRequest:
    scopes = _keys(scopes, "scopes")
    if not session_id and not scopes:
        raise InvalidArgument("get_state needs a session id, scopes or both")
    return session_pb2.GetStateRequest(session_id=session_id, scopes=scopes)


def update_state_request(
    session_id: str,
    set: Optional[Mapping[str, Any]],
    delete: Iterable[str],
    scopes: ScopesLike,
    expect: Optional[int],
) -> session_pb2.UpdateStateRequest:
    req = session_pb2.UpdateStateRequest(
        session_id=session_id, scope_deltas=scope_deltas(scopes), expected_next_sequence=_expect(expect)
    )
    if set or delete:
        req.state_delta.CopyFrom(state_delta(set, delete))
    return req


def append_request(
    session_id: str,
    messages: Iterable[MessageLike],
    expect: Optional[int] = None,
    state: StateDeltaLike = None,
    scopes: ScopesLike = None,
) -> session_pb2.AppendRequest:
    """An AppendRequest whose every message has a message id (new ULIDs where missing)."""
    req = session_pb2.AppendRequest(
        session_id=session_id, expected_next_sequence=_expect(expect), scope_deltas=scope_deltas(scopes)
    )
    delta = _delta(state)
    if delta is not None:
        req.state_delta.CopyFrom(delta)
    for m in messages:
        if isinstance(m, session_pb2.NewMessage):
            nm = req.messages.add()
            nm.CopyFrom(m)
            if not nm.message_id:
                nm.message_id = ids.new_ulid()
        elif isinstance(m, tuple) and len(m) in (2, 3):
            t: Tuple[Any, ...] = m
            req.messages.add(
                role=enum_value(session_pb2.Role, "ROLE_", t[0]),
                content=t[1],
                metadata_json=json_object(t[2], "metadata") if len(t) == 3 else "",
                message_id=ids.new_ulid(),
            )
        else:
            raise InvalidArgument(
                "a message is a session_pb2.NewMessage or (role, content[, metadata]), "
                f"not {type(m).__name__}"
            )
    return req


def encoded_append_request(
    session_id: str,
    messages: Iterable[MessageLike],
    expect: Optional[int] = None,
    state: StateDeltaLike = None,
    scopes: ScopesLike = None,
) -> bytes:
    """The encoding of append_request(session_id, messages), made without building it.

    For the batched stream, which sends appends encoded: the AppendRequest
    object, its copies of the messages and its serialization cost a caller
    more than the rest of its append. Each message is encoded by protobuf
    (a NewMessage given with its id as it is); the request around them is
    length-delimited fields (and the condition's varint), as
    wire.tagged_append writes batches.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, not {type(session_id).__name__}")
    try:
        sid = session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument("session_id is not valid UTF-8") from None
    parts = [wire.length_delimited(wire.APPEND_REQUEST_SESSION_ID_KEY, sid)] if sid else []
    for m in messages:
        if isinstance(m, session_pb2.NewMessage):
            if not m.message_id:
                nm = session_pb2.NewMessage()
                nm.CopyFrom(m)
                nm.message_id = ids.new_ulid()
                m = nm
            data = m.SerializeToString()
        elif isinstance(m, tuple) and len(m) in (2, 3):
            t: Tuple[Any, ...] = m
            data = session_pb2.NewMessage(
                role=enum_value(session_pb2.Role, "ROLE_", t[0]),
                content=t[1],
                metadata_json=json_object(t[2], "metadata") if len(t) == 3 else "",
                message_id=ids.new_ulid(),
            ).SerializeToString()
        else:
            raise InvalidArgument(
                "a message is a session_pb2.NewMessage or (role, content[, metadata]), "
                f"not {type(m).__name__}"
            )
        parts.append(wire.length_delimited(wire.APPEND_REQUEST_MESSAGES_KEY, data))
    if expect is None and state is None and scopes is None:
        return b"".join(parts)  # the common append: nothing more to encode
    delta = _delta(state)
    if delta is not None:
        parts.append(wire.length_delimited(wire.APPEND_REQUEST_STATE_DELTA_KEY, delta.SerializeToString()))
    for sd in scope_deltas(scopes):
        parts.append(wire.length_delimited(wire.APPEND_REQUEST_SCOPE_DELTAS_KEY, sd.SerializeToString()))
    if _expect(expect) is not None:
        parts.append(wire.APPEND_REQUEST_EXPECTED_KEY + wire.varint(expect))  # type: ignore[arg-type]
    return b"".join(parts)


def create_session_request(
    actor_name: str,
    session_id: Optional[str],
    namespace: str,
    automation: str,
    metadata: JSONObject,
) -> session_pb2.CreateSessionRequest:
    return session_pb2.CreateSessionRequest(
        session_id=session_id or ids.new_ulid(),
        actor_name=actor_name,
        namespace=namespace,
        automation=automation,
        metadata_json=json_object(metadata, "metadata"),
    )


def record_error_request(
    plan_id: str,
    phase: Union[str, int, None],
    step_id: str,
    error_type: str,
    message: str,
    tool: str,
    actor_name: str,
    stack_summary: str,
    attributes: JSONObject,
    record_id: Optional[str],
) -> plan_pb2.RecordErrorRequest:
    return plan_pb2.RecordErrorRequest(
        plan_id=plan_id,
        phase=enum_value(plan_pb2.Phase, "PHASE_", phase),
        step_id=step_id,
        error_type=error_type,
        message=message,
        tool=tool,
        actor_name=actor_name,
        stack_summary=stack_summary,
        attributes_json=json_object(attributes, "attributes"),
        record_id=record_id or ids.new_ulid(),
    )


def history_request(
    plan_id: str,
    phase: Union[str, int, None],
    category: Union[str, int, None],
    from_sequence: int,
    limit: int,
) -> plan_pb2.HistoryRequest:
    return plan_pb2.HistoryRequest(
        plan_id=plan_id,
        phase=enum_value(plan_pb2.Phase, "PHASE_", phase),
        category=enum_value(plan_pb2.ErrorCategory, "ERROR_CATEGORY_", category),
        from_sequence=from_sequence,
        limit=limit,
    )


def audit_record_request(
    event_type: str,
    plan_id: str,
    session_id: str,
    project_name: str,
    actor_name: str,
    user_identity: str,
    details: JSONObject,
    sync: bool,
    event_id: Optional[str] = None,
) -> audit_pb2.RecordRequest:
    """A record with its client id: event_id, or a new ULID, so that a retry
    is answered with the stored entry instead of storing it twice."""
    if event_id is None:
        event_id = ids.new_ulid()
    else:
        ids.check_ulid("event_id", event_id)
    return audit_pb2.RecordRequest(
        event_id=event_id,
        event_type=event_type,
        plan_id=plan_id,
        session_id=session_id,
        project_name=project_name,
        actor_name=actor_name,
        user_identity=user_identity,
        details_json=json_object(details, "details"),
        sync=sync,
    )


def audit_filter(
    event_type: str = "",
    plan_id: str = "",
    session_id: str = "",
    actor_name: str = "",
    since: Optional[Any] = None,
    until: Optional[Any] = None,
    principal: str = "",
    namespace: str = "",
) -> audit_pb2.Filter:
    """An audit filter; since/until are datetimes (aware, or naive UTC) or Timestamps.

    principal selects the entries caused by that authenticated principal,
    namespace those of one namespace.
    """
    f = audit_pb2.Filter(
        event_type=event_type,
        plan_id=plan_id,
        session_id=session_id,
        actor_name=actor_name,
        principal=principal,
        namespace=namespace,
    )
    if since is not None:
        f.since.CopyFrom(timestamp(since))
    if until is not None:
        f.until.CopyFrom(timestamp(until))
    return f


def timestamp(value: Any) -> Timestamp:
    if isinstance(value, Timestamp):
        return value
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts

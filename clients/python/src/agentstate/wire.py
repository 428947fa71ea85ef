"""Hand-made encoding of AppendBatch (and AppendRequest) messages.

A batch carries the encoded AppendRequests of many callers. Each request is
encoded once, by its caller, and a batch is the concatenation of its
TaggedAppend fields: the protobuf encoding of a repeated message field is
exactly that, so no AppendBatch object is built or copied into on the path
of every append.
"""

from __future__ import annotations

from agentstate.session.v1 import session_pb2

# Field keys: (field number << 3) | wire type (0 varint, 2 length-delimited).
_TAG_KEY = b"\x08"  # TaggedAppend.tag = 1
_REQUEST_KEY = b"\x12"  # TaggedAppend.request = 2
_APPENDS_KEY = b"\x0a"  # AppendBatch.appends = 1
APPEND_REQUEST_SESSION_ID_KEY = b"\x0a"  # AppendRequest.session_id = 1
APPEND_REQUEST_MESSAGES_KEY = b"\x12"  # AppendRequest.messages = 2
APPEND_REQUEST_STATE_DELTA_KEY = b"\x1a"  # AppendRequest.state_delta = 3
APPEND_REQUEST_SCOPE_DELTAS_KEY = b"\x22"  # AppendRequest.scope_deltas = 4
APPEND_REQUEST_EXPECTED_KEY = b"\x28"  # AppendRequest.expected_next_sequence = 5 (varint)


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def varint(n: int) -> bytes:
    # Runs several times per append: lengths and tags are mostly one or two bytes.
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    if 0x80 <= n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0:
        raise ValueError("varint of a negative number")
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def length_delimited(key: bytes, value: bytes) -> bytes:
    """One length-delimited field: its key, the length, the bytes."""
    return b"".join((key, varint(len(value)), value))


def tagged_append(tag: int, request: bytes) -> bytes:
    """One AppendBatch.appends field: TaggedAppend{tag, request} with its key and length."""
    inner = b"".join((_TAG_KEY, varint(tag), _REQUEST_KEY, varint(len(request)), request))
    return b"".join((_APPENDS_KEY, varint(len(inner)), inner))


def decode_batch(data: bytes) -> session_pb2.AppendBatch:
    """Parses a batch made here (for tests and debugging)."""
    return session_pb2.AppendBatch.FromString(data)

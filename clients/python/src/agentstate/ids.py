"""ULIDs as agentstate wants them: 26 upper-case Crockford base32 characters.

Session, message, plan-record and audit-event ids are ULIDs. The node
refuses anything else (lower case included) with INVALID_ARGUMENT, so
clients that choose ids (message ids make appends safe to retry) make them
here.
"""

from __future__ import annotations

import os
import threading
import time

from agentstate.errors import InvalidArgument

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_INDEX = {c: i for i, c in enumerate(ALPHABET)}
_RANDOM_BITS = 80
_RANDOM_MAX = (1 << _RANDOM_BITS) - 1

_lock = threading.Lock()
_last_ms = -1
_last_random = 0


def new_ulid() -> str:
    """A new ULID; later calls in the same process sort after earlier ones.

    Within one millisecond the random part is incremented rather than drawn
    again, so ids made in a burst keep their order (as the Go side's
    ulid.Make does). Safe to call from many threads.
    """
    global _last_ms, _last_random
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms and _last_random < _RANDOM_MAX:
            # Same (or an earlier, after a clock step) millisecond: stay monotonic.
            ms = _last_ms
            rnd = _last_random + 1
        else:
            rnd = int.from_bytes(os.urandom(10), "big")
        _last_ms, _last_random = ms, rnd
    return encode((ms << _RANDOM_BITS) | rnd)


# Every 10-bit value as its two characters: a ULID is made on every append
# (a message id), and two table look-ups per 10 bits cost a fraction of
# base64's pure-Python base32.
_PAIRS = [ALPHABET[i >> 5] + ALPHABET[i & 31] for i in range(1024)]


def encode(value: int) -> str:
    """The 26-character form of a 128-bit ULID value."""
    if not 0 <= value < (1 << 128):
        raise ValueError("a ULID is a 128-bit unsigned value")
    # 26 characters carry 130 bits: the first 3 (its top two are zero), the
    # second 5, then twelve pairs of 10.
    v, p = value, _PAIRS
    return "".join((
        ALPHABET[v >> 125], ALPHABET[(v >> 120) & 31],
        p[(v >> 110) & 1023], p[(v >> 100) & 1023], p[(v >> 90) & 1023], p[(v >> 80) & 1023],
        p[(v >> 70) & 1023], p[(v >> 60) & 1023], p[(v >> 50) & 1023], p[(v >> 40) & 1023],
        p[(v >> 30) & 1023], p[(v >> 20) & 1023], p[(v >> 10) & 1023], p[v & 1023],
    ))


def decode(s: str) -> int:
    """The 128-bit value of a valid ULID; raises InvalidArgument otherwise."""
    check_ulid("id", s)
    value = 0
    for c in s:
        value = (value << 5) | _INDEX[c]
    return value


def is_ulid(s: object) -> bool:
    """Whether s is a ULID the node accepts (canonical, upper case)."""
    if not isinstance(s, str) or len(s) != 26 or s[0] > "7":
        # The first character carries only 3 bits: above "7" overflows 128 bits.
        return False
    return all(c in _INDEX for c in s)


def check_ulid(field: str, s: object) -> None:
    """Raises InvalidArgument, naming field, unless s is a ULID the node accepts."""
    if s == "" or s is None:
        raise InvalidArgument(f"{field} is empty; want a ULID")
    if not is_ulid(s):
        shown = repr(s if not isinstance(s, str) or len(s) <= 40 else s[:40] + "...")
        raise InvalidArgument(
            f"{field} {shown} is not a ULID (26 upper-case Crockford base32 characters)"
        )


def timestamp_ms(s: str) -> int:
    """The Unix time in milliseconds a ULID was made at."""
    return decode(s) >> _RANDOM_BITS

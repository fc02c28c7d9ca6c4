"""HMAC-SHA256 signing and verification of webhook deliveries, for the server and for senders."""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from oomrl.errors import SignatureError

TIMESTAMP_HEADER = "X-OOMRL-Timestamp"
SIGNATURE_HEADER = "X-OOMRL-Signature"
SIGNATURE_PREFIX = "sha256="
DEFAULT_TOLERANCE_S = 300
UNIX_SECONDS = re.compile(r"[0-9]{1,12}")  # ASCII digits only


def signature(body: bytes, secret: str, timestamp: int | str) -> str:
    """`sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">` keyed with the shared secret."""
    message = str(timestamp).encode("ascii") + b"." + body
    digest = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """The two headers a sender adds to a delivery of `body` (timestamp defaults to now)."""
    stamp = int(time.time()) if timestamp is None else int(timestamp)
    return {TIMESTAMP_HEADER: str(stamp), SIGNATURE_HEADER: signature(body, secret, stamp)}


def verify(
    body: bytes,
    secret: str,
    timestamp_header: str | None,
    signature_header: str | None,
    *,
    now: float | None = None,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> int:
    """Check a delivery; return its timestamp or raise SignatureError saying what is wrong.

    The timestamp bounds replays of a captured delivery to `tolerance_s` in either direction
    (clock skew). Within that window, the alert-id de-duplication catches replays.
    """
    if not timestamp_header:
        raise SignatureError(f"missing {TIMESTAMP_HEADER} header")
    if not signature_header:
        raise SignatureError(f"missing {SIGNATURE_HEADER} header")
    stamp_text = timestamp_header.strip()
    if not UNIX_SECONDS.fullmatch(stamp_text):  # str.isdigit() also takes "²", which int() refuses
        raise SignatureError(
            f"{TIMESTAMP_HEADER} must be unix seconds, got {timestamp_header[:40]!r}"
        )
    stamp = int(stamp_text)
    current = time.time() if now is None else now
    if abs(current - stamp) > tolerance_s:
        raise SignatureError(
            f"stale delivery: timestamp {stamp} is {abs(current - stamp):.0f} s from now "
            f"(limit {tolerance_s} s)"
        )
    given = signature_header.strip()
    if not given.startswith(SIGNATURE_PREFIX):
        raise SignatureError(f"{SIGNATURE_HEADER} must start with {SIGNATURE_PREFIX!r}")
    expected = signature(body, secret, stamp)
    # compare_digest on equal-type ASCII strings: constant time in the length of the input.
    if not hmac.compare_digest(expected.encode("ascii"), given.encode("ascii", "replace")):
        raise SignatureError("signature does not match the body and timestamp")
    return stamp

"""The strategy host's wire format: length-prefixed frames of JSON plus raw arrays, never pickle.

A frame is a 4-byte big-endian length, then a 4-byte length of a UTF-8 JSON header, the header,
and the bytes of the arrays it names. An array appears in the JSON as `{"$a": i}` and is described
in the header's `$blobs` list as `[dtype, shape]`; only a few fixed dtypes exist. Each side decodes
what it receives itself and checks every size, so nothing crosses the boundary but plain data.
Imports only the standard library and numpy: the file is copied into every jail.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

import numpy as np

DTYPES = ("<f8", "<i8", "|b1", "|u1")
NS_PER_DAY = 86_400_000_000_000
MAX_DEPTH = 32


class WireError(Exception):
    """A frame that is malformed, too large, or late."""


def _json_constant(name: str) -> Any:
    raise WireError(f"non-finite number {name} in a frame header (floats that may be NaN travel as arrays)")


def encode(message: Mapping[str, Any]) -> bytes:
    """One frame of `message` (JSON values and numpy arrays of the DTYPES)."""
    blobs: list[np.ndarray] = []

    def lift(value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise WireError("message nested too deeply")
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value)
            if array.dtype.str not in DTYPES:
                raise WireError(f"arrays of dtype {array.dtype.str} do not cross the wire")
            blobs.append(array)
            return {"$a": len(blobs) - 1}
        if isinstance(value, dict):
            return {str(k): lift(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [lift(v, depth + 1) for v in value]
        return value

    header = lift(dict(message))
    header["$blobs"] = [[a.dtype.str, list(a.shape)] for a in blobs]
    text = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("utf-8")
    body = b"".join([struct.pack(">I", len(text)), text, *(a.tobytes() for a in blobs)])
    return struct.pack(">I", len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    """The message of one frame's body; WireError for anything but exactly what the header says."""
    if len(body) < 4:
        raise WireError("frame shorter than its header length")
    (size,) = struct.unpack(">I", body[:4])
    if 4 + size > len(body):
        raise WireError("frame header longer than the frame")
    try:
        header = json.loads(body[4:4 + size].decode("utf-8"), parse_constant=_json_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("$blobs"), list):
        raise WireError("frame header must be an object with a $blobs list")
    arrays: list[np.ndarray] = []
    offset = 4 + size
    for spec in header.pop("$blobs"):
        if not (isinstance(spec, list) and len(spec) == 2 and spec[0] in DTYPES
                and isinstance(spec[1], list) and len(spec[1]) <= 4
                and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**40
                        for n in spec[1])):
            raise WireError(f"bad array description {spec!r}")
        dtype = np.dtype(spec[0])
        nbytes = dtype.itemsize * math.prod(spec[1])
        if offset + nbytes > len(body):
            raise WireError("frame shorter than its arrays")
        array = np.frombuffer(body, dtype, math.prod(spec[1]), offset).reshape(spec[1])
        if dtype.kind == "b" and array.size and array.view("|u1").max() > 1:
            raise WireError("a boolean array holds bytes other than 0 and 1")
        arrays.append(array)
        offset += nbytes
    if offset != len(body):
        raise WireError("frame longer than its arrays")

    def lower(value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise WireError("message nested too deeply")
        if isinstance(value, dict):
            if set(value) == {"$a"}:
                index = value["$a"]
                if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(arrays):
                    raise WireError(f"unknown array reference {index!r}")
                return arrays[index]
            return {k: lower(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [lower(v, depth + 1) for v in value]
        return value

    return lower(header)  # type: ignore[no-any-return]


def _wait(fd: int, writable: bool, deadline: float | None) -> None:
    remaining = None if deadline is None else deadline - time.monotonic()
    if remaining is not None and remaining <= 0:
        raise WireError("the other side did not answer in time")
    ready = select.select([], [fd], [], remaining) if writable else select.select([fd], [], [], remaining)
    if not any(ready):
        raise WireError("the other side did not answer in time")


def write_frame(fd: int, frame: bytes, deadline: float | None = None) -> None:
    """Write one encoded frame to `fd` (by the deadline, a time.monotonic() value)."""
    view = memoryview(frame)
    while view:
        _wait(fd, True, deadline)
        try:
            written = os.write(fd, view[:1 << 20])
        except BrokenPipeError:
            raise WireError("the other side closed the channel") from None
        view = view[written:]


def _read_exact(fd: int, count: int, deadline: float | None) -> bytes:
    chunks, missing = [], count
    while missing:
        _wait(fd, False, deadline)
        chunk = os.read(fd, min(missing, 1 << 20))
        if not chunk:
            raise EOFError("channel closed")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, limit: int, deadline: float | None = None) -> dict[str, Any]:
    """Read and decode one frame of at most `limit` bytes; EOFError at a clean end of the channel."""
    (size,) = struct.unpack(">I", _read_exact(fd, 4, deadline))
    if size > limit:
        raise WireError(f"frame of {size} bytes exceeds the limit of {limit}")
    try:
        body = _read_exact(fd, size, deadline)
    except EOFError:
        raise WireError("channel closed in the middle of a frame") from None
    return decode(body)


def day_ns(day: date | datetime | Any) -> int:
    """A date as nanoseconds since the epoch at midnight (what day arrays carry)."""
    if isinstance(day, datetime):
        day = day.date()
    if isinstance(day, date):
        return (day.toordinal() - 719_163) * NS_PER_DAY
    return int(np.datetime64(day, "ns").astype("int64"))


def ns_day(value: int) -> date:
    """The date of a nanoseconds-since-epoch midnight."""
    return date.fromordinal(int(value) // NS_PER_DAY + 719_163)


def to_plain(value: Any, depth: int = 0) -> Any:
    """A copy of a value as wire data: None, bool, int, finite float, str, lists, string-keyed dicts,
    arrays, dates; numpy and pandas values converted; anything else is refused."""
    if depth > MAX_DEPTH:
        raise TypeError("value nested too deeply to cross the wire")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else {"$float": repr(number)}
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            return value.astype("<f8")
        if value.dtype.kind in "iu":
            return value.astype("<i8")
        if value.dtype.kind == "b":
            return value.astype("|b1")
        return [to_plain(v, depth + 1) for v in value.tolist()]
    kind = type(value).__name__
    if type(value).__module__.startswith("pandas") and kind in ("Series", "DataFrame", "Timestamp"):
        return _pandas_plain(value, kind, depth)
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: to_plain(v, depth + 1) for k, v in value.items()}
        return {"$dict": [[to_plain(k, depth + 1), to_plain(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [to_plain(v, depth + 1) for v in value]
    raise TypeError(f"a {type(value).__name__} cannot cross the wire (plain data only)")


def _pandas_plain(value: Any, kind: str, depth: int) -> Any:
    if kind == "Timestamp":
        return {"$datetime": value.isoformat()}
    index = [to_plain(v, depth + 1) for v in value.index.tolist()]
    if kind == "Series":
        return {"$series": {"index": index, "values": to_plain(value.to_numpy(), depth + 1)}}
    return {"$frame": {"index": index, "columns": [to_plain(c, depth + 1) for c in value.columns.tolist()],
                       "values": to_plain(value.to_numpy(), depth + 1)}}


def from_plain(value: Any, depth: int = 0) -> Any:
    """The receiving side's own values from wire data (the inverse of to_plain; pandas for tables)."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if isinstance(value, list):
        return [from_plain(v, depth + 1) for v in value]
    if isinstance(value, np.ndarray):
        return value.copy()
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, inner), = value.items()
        if key == "$float" and inner in ("nan", "inf", "-inf"):
            return float(inner)
        if key == "$date" and isinstance(inner, str):
            return date.fromisoformat(inner)
        if key == "$datetime" and isinstance(inner, str):
            return datetime.fromisoformat(inner)
        if key == "$dict" and isinstance(inner, list):
            return {_key(from_plain(k, depth + 1)): from_plain(v, depth + 1) for k, v in
                    (_pair(item) for item in inner)}
        if key in ("$series", "$frame") and isinstance(inner, dict):
            return _pandas_value(key, inner, depth)
    return {k: from_plain(v, depth + 1) for k, v in value.items()}


def _pair(item: Any) -> tuple[Any, Any]:
    if not (isinstance(item, list) and len(item) == 2):
        raise WireError("a $dict entry must be a [key, value] pair")
    return item[0], item[1]


def _key(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        raise WireError("dict keys must be scalars")
    return value


def _pandas_value(key: str, inner: dict[str, Any], depth: int) -> Any:
    import pandas as pd

    index = from_plain(inner.get("index"), depth + 1)
    values = from_plain(inner.get("values"), depth + 1)
    if key == "$series":
        return pd.Series(values, index=index)
    return pd.DataFrame(values, index=index, columns=from_plain(inner.get("columns"), depth + 1))

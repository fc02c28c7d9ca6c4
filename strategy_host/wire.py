"""The strategy host's wire format: length-prefixed frames of JSON plus raw arrays, never pickle.

A frame is a 4-byte big-endian length of the rest, the lengths of its array table and of its JSON
text, the array table (a count, then per array a dtype code, a number of dimensions and the
dimensions), the UTF-8 JSON text, and the bytes of the arrays. An array appears in the JSON as
`{"$a": i}`; only a few fixed dtypes exist. The messages of a replay's every decision (the engine's
question and book, the host's answer) go in fixed binary layouts instead (FIXED_MARK). Each side
decodes what it receives itself and checks every size, so nothing crosses the boundary but plain
data. Imports only the standard library and numpy: the file is copied into every jail.
"""

from __future__ import annotations

import json
import math
import os
import socket
import struct
import threading
import time
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any, TypeGuard

import numpy as np

DTYPES = ("<f8", "<i8", "|b1", "|u1")
MAX_DIMS = 4
DTYPE_OBJECTS = tuple(np.dtype(d) for d in ("<f8", "<i8", "|b1", "|u1"))
CHUNK = 1 << 20
FD_SIZE = struct.calcsize("i")
FD_SPACE = socket.CMSG_SPACE(4 * FD_SIZE)  # room for the descriptors one read may carry
MAX_ITEMS = 1 << 34
NS_PER_DAY = 86_400_000_000_000
MAX_DEPTH = 32


class WireError(Exception):
    """A frame that is malformed, too large, or late."""


def _json_constant(name: str) -> Any:
    raise WireError(
        f"non-finite number {name} in a frame header (floats that may be NaN travel as arrays)"
    )


_LOCAL = threading.local()  # the arrays of the frame this thread is encoding or decoding
_SHAPES = [struct.Struct(f">{n}Q") for n in range(MAX_DIMS + 1)]
_SIZES = struct.Struct(">III")


def _lift(value: Any) -> Any:
    """What JSON cannot hold, called by json's own walk: arrays become references."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        if array.dtype.str not in DTYPES or array.ndim > MAX_DIMS:
            raise WireError(
                f"arrays of dtype {array.dtype.str} and {array.ndim} dimensions "
                "do not cross the wire"
            )
        _LOCAL.blobs.append(array)
        return {"$a": len(_LOCAL.blobs) - 1}
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    raise WireError(f"a {type(value).__name__} does not cross the wire")


def _lower(value: dict[str, Any]) -> Any:
    """A `{"$a": i}` reference back to its array (json's decoder calls this for every object)."""
    if len(value) == 1 and "$a" in value:
        arrays = _LOCAL.arrays
        index = value["$a"]
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(arrays):
            raise WireError(f"unknown array reference {index!r}")
        return arrays[index]
    return value


# Made once: json.dumps and json.loads build a new encoder or decoder per call when given options.
_ENCODER = json.JSONEncoder(default=_lift, allow_nan=False, separators=(",", ":"))
_DECODER = json.JSONDecoder(parse_constant=_json_constant)
_DECODER_WITH_ARRAYS = json.JSONDecoder(parse_constant=_json_constant, object_hook=_lower)


def encode(message: Mapping[str, Any]) -> bytes:
    """One frame of `message` (JSON values and numpy arrays of the DTYPES)."""
    fixed = _fixed(message)
    if fixed is not None:
        return fixed
    blobs: list[np.ndarray] = []
    _LOCAL.blobs = blobs
    try:
        text = _ENCODER.encode(message).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError(f"message cannot be encoded: {exc}") from None
    finally:
        _LOCAL.blobs = None
    table = [struct.pack(">I", len(blobs))]
    for array in blobs:
        table.append(
            bytes((DTYPES.index(array.dtype.str), array.ndim))
            + _SHAPES[array.ndim].pack(*array.shape)
        )
    head = b"".join(table)
    if blobs:  # JSON may end in spaces: the arrays then start 8-aligned in the frame's body, and
        #        the receiving side's views of them need no unaligned loads
        text += b" " * (-(8 + len(head) + len(text)) % 8)
    body: list[bytes | memoryview] = [
        _SIZES.pack(8 + len(head) + len(text) + sum(a.nbytes for a in blobs), len(head), len(text)),
        head,
        text,
        *(a.data for a in blobs),
    ]
    return b"".join(body)


def decode(body: bytes) -> dict[str, Any]:
    """The message of one frame's body; WireError for anything but exactly what its tables say."""
    try:
        head_size, text_size = struct.unpack_from(">II", body)
        if head_size == FIXED_MARK:
            return _unfixed(body, text_size)
        (count,) = struct.unpack_from(">I", body, 8)
        offset, specs = 12, []
        for _ in range(count):
            code, ndim = body[offset], body[offset + 1]
            if code >= len(DTYPES) or ndim > MAX_DIMS:
                raise WireError("bad array description")
            specs.append((DTYPE_OBJECTS[code], _SHAPES[ndim].unpack_from(body, offset + 2)))
            offset += 2 + 8 * ndim
    except (struct.error, IndexError):
        raise WireError("frame shorter than its tables") from None
    if offset != 8 + head_size or offset + text_size > len(body):
        raise WireError("frame tables do not add up")
    arrays: list[np.ndarray] = []
    start = offset + text_size
    for dtype, shape in specs:
        size = math.prod(shape)
        if size > MAX_ITEMS or start + dtype.itemsize * size > len(body):
            raise WireError("frame shorter than its arrays")
        if dtype.kind == "b" and body[start : start + size].translate(None, b"\x00\x01"):
            raise WireError("a boolean array holds bytes other than 0 and 1")
        arrays.append(np.frombuffer(body, dtype, size, start).reshape(shape))
        start += dtype.itemsize * size
    if start != len(body):
        raise WireError("frame longer than its arrays")
    try:
        text = body[offset : offset + text_size].decode("utf-8")
        if arrays:
            _LOCAL.arrays = arrays
            try:
                message = _DECODER_WITH_ARRAYS.decode(text)
            finally:
                _LOCAL.arrays = None
        else:
            message = _DECODER.decode(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WireError(f"frame header is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise WireError("a frame must hold an object")
    return message


# The messages of a replay's every decision in fixed layouts, no JSON (a few microseconds each way
# on every round trip): the engine's question and book, the host's answer. The body starts with
# FIXED_MARK where a JSON frame's table size is (no table is that large), then the layout's number;
# then little-endian 8-byte fields and the arrays' bytes, each at an 8-aligned offset. Decoding
# gives exactly the message the JSON frame gives; any other message goes as JSON.
FIXED_MARK = 0xFFFF_FFFF
ANSWER, BOOK, QUESTION = 1, 2, 3
_FIXED_HEAD = struct.Struct(">II")
_ANSWER = struct.Struct("<qq")  # n (idx and w), m (due; -1: none)
_BOOK = struct.Struct("<qdq")  # handle, portfolio value, n (idx and w; -1: holdings {})
# Handle, as_of, rows, k (members; -1: None), m (due days; -1: none), last
_QUESTION = struct.Struct("<qqqqqq")
_INT64 = (-(1 << 63), 1 << 63)
_I8, _F8, _B1 = (np.dtype(d) for d in ("<i8", "<f8", "|b1"))


def _vector(value: Any, dtype: np.dtype[Any]) -> TypeGuard[np.ndarray]:
    """Is `value` a plain 1-D C-contiguous array of exactly `dtype`?"""
    return (
        type(value) is np.ndarray
        and value.dtype == dtype
        and value.ndim == 1
        and value.flags.c_contiguous
    )


def _int(value: Any) -> bool:
    """Is `value` a plain int that fits int64?"""
    return type(value) is int and _INT64[0] <= value < _INT64[1]


def _fixed(message: Mapping[str, Any]) -> bytes | None:
    """The frame of `message` in its fixed layout, or None when it has none (then it goes as
    JSON)."""
    if type(message) is not dict:
        return None
    keys = message.keys()
    if "op" not in message:  # an answer: {idx, w, unknown: [], (due)}
        if (
            not (keys == {"idx", "w", "unknown"} or keys == {"idx", "w", "unknown", "due"})
            or type(message["unknown"]) is not list
            or message["unknown"]
        ):
            return None
        idx, w, due = message["idx"], message["w"], message.get("due")
        if not (
            _vector(idx, _I8)
            and _vector(w, _F8)
            and len(idx) == len(w)
            and (due is None and "due" not in message or _vector(due, _B1))
        ):
            return None
        return _framed(
            ANSWER,
            _ANSWER.pack(len(idx), -1 if due is None else len(due)),
            idx,
            w,
            *(() if due is None else (due,)),
        )
    op = message["op"]
    if op == "book" and (keys == {"op", "handle", "portfolio_value", "holdings"}):
        handle, value, holdings = message["handle"], message["portfolio_value"], message["holdings"]
        if not (
            _int(handle)
            and type(value) is float
            and math.isfinite(value)
            and type(holdings) is dict
        ):
            return None
        if not holdings:
            return _framed(BOOK, _BOOK.pack(handle, value, -1))
        if holdings.keys() != {"idx", "w"}:
            return None
        idx, w = holdings["idx"], holdings["w"]
        if not (_vector(idx, _I8) and _vector(w, _F8) and len(idx) == len(w)):
            return None
        return _framed(BOOK, _BOOK.pack(handle, value, len(idx)), idx, w)
    if (
        op == "decide"
        and message.get("book") == "next"
        and (
            keys == {"op", "handle", "as_of", "members", "rows", "book"}
            or keys == {"op", "handle", "as_of", "members", "rows", "book", "due"}
        )
    ):
        handle, as_of, rows, members, due = (
            message["handle"],
            message["as_of"],
            message["rows"],
            message["members"],
            message.get("due"),
        )
        if not (_int(handle) and _int(as_of) and _int(rows)):
            return None
        if members is not None and not (
            type(members) is dict and members.keys() == {"idx"} and _vector(members["idx"], _I8)
        ):
            return None
        if due is not None and not (
            type(due) is dict
            and due.keys() == {"days", "last", "first_only"}
            and _vector(due["days"], _I8)
            and _int(due["last"])
            and due["first_only"] is True
        ):
            return None
        if due is None and "due" in message:
            return None
        arrays = ([] if members is None else [members["idx"]]) + (
            [] if due is None else [due["days"]]
        )
        return _framed(
            QUESTION,
            _QUESTION.pack(
                handle,
                as_of,
                rows,
                -1 if members is None else len(members["idx"]),
                -1 if due is None else len(due["days"]),
                0 if due is None else due["last"],
            ),
            *arrays,
        )
    return None


def _framed(layout: int, fields: bytes, *arrays: np.ndarray) -> bytes:
    """A fixed-layout frame: its length, the mark, the layout, the fields, the arrays
    (8-aligned)."""
    parts: list[bytes | memoryview] = [b"", _FIXED_HEAD.pack(FIXED_MARK, layout), fields]
    size = 8 + len(fields)
    for array in arrays:
        parts.append(array.data)
        size += array.nbytes
        if array.nbytes % 8:
            parts.append(b"\0" * (-array.nbytes % 8))
            size += -array.nbytes % 8
    parts[0] = struct.pack(">I", size)
    return b"".join(parts)


def _unfixed(body: bytes, layout: int) -> dict[str, Any]:
    """The message of a fixed-layout body; WireError for anything but exactly its layout."""

    def arrays(offset: int, *specs: tuple[np.dtype[Any], int]) -> list[np.ndarray]:
        found = []
        for dtype, count in specs:
            if not 0 <= count <= MAX_ITEMS:
                raise WireError("a fixed frame's array size is out of range")
            size = dtype.itemsize * count
            end = offset + size + (-size % 8)
            if end > len(body):
                raise WireError("fixed frame shorter than its arrays")
            if dtype.kind == "b" and body[offset : offset + size].translate(None, b"\x00\x01"):
                raise WireError("a boolean array holds bytes other than 0 and 1")
            if body[offset + size : end].strip(b"\x00"):
                raise WireError("a fixed frame's padding holds data")
            found.append(np.frombuffer(body, dtype, count, offset))
            offset = end
        if offset != len(body):
            raise WireError("fixed frame longer than its arrays")
        return found

    try:
        if layout == ANSWER:
            n, m = _ANSWER.unpack_from(body, 8)
            specs = [(_I8, n), (_F8, n)] + ([] if m == -1 else [(_B1, m)])
            found = arrays(8 + _ANSWER.size, *specs)
            message: dict[str, Any] = {"idx": found[0], "w": found[1], "unknown": []}
            if m != -1:
                message["due"] = found[2]
            return message
        if layout == BOOK:
            handle, value, n = _BOOK.unpack_from(body, 8)
            if not math.isfinite(value):
                raise WireError("a book's portfolio value must be finite")
            found = arrays(8 + _BOOK.size, *([] if n == -1 else [(_I8, n), (_F8, n)]))
            return {
                "op": "book",
                "handle": handle,
                "portfolio_value": value,
                "holdings": {} if n == -1 else {"idx": found[0], "w": found[1]},
            }
        if layout == QUESTION:
            handle, as_of, rows, k, m, last = _QUESTION.unpack_from(body, 8)
            found = arrays(
                8 + _QUESTION.size,
                *([] if k == -1 else [(_I8, k)]),
                *([] if m == -1 else [(_I8, m)]),
            )
            message = {
                "op": "decide",
                "handle": handle,
                "as_of": as_of,
                "members": None if k == -1 else {"idx": found[0]},
                "rows": rows,
                "book": "next",
            }
            if m != -1:
                message["due"] = {"days": found[-1], "last": last, "first_only": True}
            elif last:
                raise WireError("a question without a schedule names a last rebalance")
            return message
    except struct.error:
        raise WireError("fixed frame shorter than its fields") from None
    raise WireError(f"unknown fixed layout {layout}")


def write_frame(fd: int, frame: bytes) -> None:
    """Write one encoded frame to `fd`."""
    view = memoryview(frame)
    while view:
        try:
            written = os.write(fd, view)
        except BrokenPipeError:
            raise WireError("the other side closed the channel") from None
        view = view[written:]


class FrameReader:
    """Reads frames from `fd`, as many bytes per system call as are there.

    On a UNIX socket (`passes_fds`) it also collects the file descriptors sent along with the data
    (a market's shared memory), in order, for `take_fd`.
    """

    def __init__(self, fd: int, passes_fds: bool = False, spin_s: float = 0.0) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.fds: list[int] = []
        self.passes_fds = passes_fds
        self.spin_ns = int(spin_s * 1e9)
        self.sock = socket.socket(fileno=os.dup(fd)) if passes_fds else None
        if self.spin_ns and self.sock is None:
            copy = os.dup(fd)
            try:
                self.sock = socket.socket(fileno=copy)
            except OSError:  # not a socket (a pipe): blocking reads only
                os.close(copy)
                self.spin_ns = 0
        # One buffer read into again and again: a fresh 1 MiB bytes object per read costs an mmap,
        # page faults and an munmap each time, several times a small message's round trip.
        self.chunk = bytearray(CHUNK)
        self.view = memoryview(self.chunk)

    def _fill(self, inside: bool) -> None:
        count = self._poll() if self.spin_ns else None
        if count is None:
            count = self._receive(0)
        if not count:
            if inside:
                raise WireError("channel closed in the middle of a frame")
            raise EOFError("channel closed")
        self.buffer += self.view[:count]

    def _receive(self, flags: int) -> int:
        """One read into the chunk (descriptors that came with it kept for take_fd): its size."""
        if self.sock is None:
            return os.readv(self.fd, [self.view])
        if not self.passes_fds:
            return self.sock.recv_into(self.view, 0, flags)
        count, ancillary, _, _ = self.sock.recvmsg_into([self.view], FD_SPACE, flags)
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(data) - len(data) % FD_SIZE
                self.fds.extend(struct.unpack(f"{usable // FD_SIZE}i", data[:usable]))
        return count

    def _poll(self) -> int | None:
        """The size of a read that found bytes within spin_ns, polling without blocking; None when
        none came (then a blocking read waits). A reader that polls sees a frame microseconds after
        it is written, where a sleeping one waits for the scheduler to wake it; it gives up its
        core on every turn, so other work on a busy machine still runs."""
        deadline = time.monotonic_ns() + self.spin_ns
        while True:
            try:
                return self._receive(socket.MSG_DONTWAIT)
            except BlockingIOError:
                if time.monotonic_ns() > deadline:
                    return None
                os.sched_yield()

    def close(self) -> None:
        """Close the reader's own duplicate of the descriptor (the descriptor stays its owner's)."""
        if self.sock is not None:
            self.sock.close()

    def take_fd(self) -> int:
        """The next file descriptor that came with the frames; WireError when none did."""
        if not self.fds:
            raise WireError("a file descriptor was expected with this frame")
        return self.fds.pop(0)

    def read(self, limit: int) -> dict[str, Any]:
        """Decode the next frame of at most `limit` bytes; EOFError at a clean end of the
        channel."""
        while len(self.buffer) < 4:
            self._fill(bool(self.buffer))
        (size,) = struct.unpack_from(">I", self.buffer)
        if size > limit:
            raise WireError(f"frame of {size} bytes exceeds the limit of {limit}")
        while len(self.buffer) < 4 + size:
            self._fill(True)
        body = bytes(self.buffer[4 : 4 + size])
        del self.buffer[: 4 + size]
        return decode(body)


def send_fd(fd: int, frame: bytes, passed: int) -> None:
    """Write `frame` to the UNIX socket `fd` with the descriptor `passed` attached to its first
    byte."""
    sock = socket.socket(fileno=os.dup(fd))
    try:
        sent = sock.sendmsg(
            [frame[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", passed))]
        )
        if sent != 1:
            raise WireError("could not send a file descriptor")
    finally:
        sock.close()
    write_frame(fd, frame[1:])


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


def held_float(value: Any) -> float:
    """The float a value holds: a float subclass through `float.__float__`, never its own
    override."""
    return float.__float__(value) if isinstance(value, float) else float(value)


def to_plain(value: Any, depth: int = 0) -> Any:
    """A copy of a value as wire data: None, bool, int, finite float, str, lists, string-keyed
    dicts, arrays, dates; numpy and pandas values converted; anything else is refused."""
    if depth > MAX_DEPTH:
        raise TypeError("value nested too deeply to cross the wire")
    # Values are read through the base types' own methods (`str.__str__`, `int.__index__`,
    # `float.__float__`, `dict.items`, `list.copy`), never a subclass's override: what crosses is
    # what the object holds, never what its methods report.
    if value is None or isinstance(value, bool):
        return bool(value) if value is not None else None
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, np.integer) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        number = held_float(value)
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
        items = [(to_plain(k, depth + 1), v) for k, v in dict.items(value)]
        # a lone "$..." key would read back as a tagged value ({"$date": ...} as a date): kept as
        # pairs
        if all(isinstance(k, str) for k, _ in items) and not (
            len(items) == 1 and items[0][0].startswith("$")
        ):
            return {k: to_plain(v, depth + 1) for k, v in items}
        return {"$dict": [[k, to_plain(v, depth + 1)] for k, v in items]}
    if isinstance(value, (list, tuple)):
        return [
            to_plain(v, depth + 1)
            for v in (
                list.copy(value)
                if isinstance(value, list)
                else tuple.__getitem__(value, slice(None))
            )
        ]
    raise TypeError(f"a {type(value).__name__} cannot cross the wire (plain data only)")


def _pandas_plain(value: Any, kind: str, depth: int) -> Any:
    if kind == "Timestamp":
        return {"$datetime": value.isoformat()}
    index = [to_plain(v, depth + 1) for v in value.index.tolist()]
    if kind == "Series":
        return {"$series": {"index": index, "values": to_plain(value.to_numpy(), depth + 1)}}
    return {
        "$frame": {
            "index": index,
            "columns": [to_plain(c, depth + 1) for c in value.columns.tolist()],
            "values": to_plain(value.to_numpy(), depth + 1),
        }
    }


def from_plain(value: Any, depth: int = 0) -> Any:
    """The receiving side's own values from wire data (the inverse of to_plain; pandas for
    tables)."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if isinstance(value, list):
        return [from_plain(v, depth + 1) for v in value]
    if isinstance(value, np.ndarray):
        return value.copy()
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key == "$float" and inner in ("nan", "inf", "-inf"):
            return float(inner)
        if key == "$date" and isinstance(inner, str):
            return date.fromisoformat(inner)
        if key == "$datetime" and isinstance(inner, str):
            return datetime.fromisoformat(inner)
        if key == "$dict" and isinstance(inner, list):
            return {
                _key(from_plain(k, depth + 1)): from_plain(v, depth + 1)
                for k, v in (_pair(item) for item in inner)
            }
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

"""The strategy host's wire format: length-prefixed frames of JSON plus raw arrays, never pickle.

A frame is a 4-byte big-endian length of the rest, the lengths of its array table and of its JSON
text, the array table (a count, then per array a dtype code, a number of dimensions and the
dimensions), the UTF-8 JSON text, and the bytes of the arrays. An array appears in the JSON as
`{"$a": i}`; only a few fixed dtypes exist. Each side decodes
what it receives itself and checks every size, so nothing crosses the boundary but plain data.
Imports only the standard library and numpy: the file is copied into every jail.
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
from typing import Any

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
    raise WireError(f"non-finite number {name} in a frame header (floats that may be NaN travel as arrays)")


_LOCAL = threading.local()  # the arrays of the frame this thread is encoding or decoding
_SHAPES = [struct.Struct(f">{n}Q") for n in range(MAX_DIMS + 1)]
_SIZES = struct.Struct(">III")


def _lift(value: Any) -> Any:
    """What JSON cannot hold, called by json's own walk: arrays become references."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        if array.dtype.str not in DTYPES or array.ndim > MAX_DIMS:
            raise WireError(f"arrays of dtype {array.dtype.str} and {array.ndim} dimensions "
                            "do not cross the wire")
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
        table.append(bytes((DTYPES.index(array.dtype.str), array.ndim)) + _SHAPES[array.ndim].pack(*array.shape))
    head = b"".join(table)
    if blobs:  # JSON may end in spaces: the arrays then start 8-aligned in the frame's body, and
        #        the receiving side's views of them need no unaligned loads
        text += b" " * (-(8 + len(head) + len(text)) % 8)
    body: list[bytes | memoryview] = [
        _SIZES.pack(8 + len(head) + len(text) + sum(a.nbytes for a in blobs), len(head), len(text)),
        head, text, *(a.data for a in blobs)]
    return b"".join(body)


def decode(body: bytes) -> dict[str, Any]:
    """The message of one frame's body; WireError for anything but exactly what its tables say."""
    try:
        head_size, text_size = struct.unpack_from(">II", body)
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
        if dtype.kind == "b" and body[start:start + size].translate(None, b"\x00\x01"):
            raise WireError("a boolean array holds bytes other than 0 and 1")
        arrays.append(np.frombuffer(body, dtype, size, start).reshape(shape))
        start += dtype.itemsize * size
    if start != len(body):
        raise WireError("frame longer than its arrays")
    try:
        text = body[offset:offset + text_size].decode("utf-8")
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
        """Decode the next frame of at most `limit` bytes; EOFError at a clean end of the channel."""
        while len(self.buffer) < 4:
            self._fill(bool(self.buffer))
        (size,) = struct.unpack_from(">I", self.buffer)
        if size > limit:
            raise WireError(f"frame of {size} bytes exceeds the limit of {limit}")
        while len(self.buffer) < 4 + size:
            self._fill(True)
        body = bytes(self.buffer[4:4 + size])
        del self.buffer[:4 + size]
        return decode(body)


def send_fd(fd: int, frame: bytes, passed: int) -> None:
    """Write `frame` to the UNIX socket `fd` with the descriptor `passed` attached to its first byte."""
    sock = socket.socket(fileno=os.dup(fd))
    try:
        sent = sock.sendmsg([frame[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", passed))])
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
    """The float a value holds: a float subclass through `float.__float__`, never its own override."""
    return float.__float__(value) if isinstance(value, float) else float(value)


def to_plain(value: Any, depth: int = 0) -> Any:
    """A copy of a value as wire data: None, bool, int, finite float, str, lists, string-keyed dicts,
    arrays, dates; numpy and pandas values converted; anything else is refused."""
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
        # a lone "$..." key would read back as a tagged value ({"$date": ...} as a date): kept as pairs
        if all(isinstance(k, str) for k, _ in items) and not (len(items) == 1 and items[0][0].startswith("$")):
            return {k: to_plain(v, depth + 1) for k, v in items}
        return {"$dict": [[k, to_plain(v, depth + 1)] for k, v in items]}
    if isinstance(value, (list, tuple)):
        return [to_plain(v, depth + 1) for v in (list.copy(value) if isinstance(value, list)
                                                  else tuple.__getitem__(value, slice(None)))]
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

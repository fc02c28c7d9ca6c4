"""The strategy host's wire format and its client: malformed frames are refused, S's errors map by
type.

Neither side trusts the other (a host runs S; a relay carries a test process's requests), so every
frame is decoded against its own tables and every error answer is checked field by field. Frames
travel over real socket pairs where reading them is what is tested.
"""

from __future__ import annotations

import builtins
import json
import os
import socket
import struct
import threading
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from strategy_host import wire
from strategy_host.client import MAPPED, Channel, HostError, HostGone, StrategyError, remote_error


def body(message: dict) -> bytes:  # type: ignore[type-arg]
    """A frame's body (without its 4-byte length), as decode reads it."""
    return wire.encode(message)[4:]


def frame(head: bytes, text: bytes, data: bytes = b"") -> bytes:
    """A hand-built body: the table (`head`, count included), the JSON text, the array bytes."""
    return struct.pack(">II", len(head), len(text)) + head + text + data


def table(*arrays: tuple[int, tuple[int, ...]]) -> bytes:
    return struct.pack(">I", len(arrays)) + b"".join(
        struct.pack(f">BB{len(shape)}Q", code, len(shape), *shape) for code, shape in arrays
    )


def test_plain_values_and_arrays_of_each_dtype_cross_unchanged() -> None:
    arrays = {
        "f": np.array([[1.5, np.nan], [np.inf, -0.0]]),
        "i": np.arange(3, dtype="<i8"),
        "b": np.array([True, False]),
        "u": np.frombuffer(b"\x00\xff", "|u1"),
        "empty": np.zeros((0, 4)),
        "strided": np.arange(10.0)[::3],
    }
    message = {"op": "x", "n": None, "t": True, "s": "é", "l": [1, 2.5, {"k": "v"}], **arrays}
    decoded = wire.decode(body(message))
    assert {k: decoded[k] for k in ("op", "n", "t", "s", "l")} == {
        k: message[k] for k in ("op", "n", "t", "s", "l")
    }
    for name, array in arrays.items():
        np.testing.assert_array_equal(decoded[name], array)
        assert decoded[name].dtype == array.dtype and decoded[name].shape == array.shape
    assert wire.decode(body({"v": np.int64(3), "w": np.bool_(True)})) == {"v": 3, "w": True}


@pytest.mark.parametrize(
    "value, error",
    [
        ({"x": float("nan")}, "cannot be encoded"),
        ({"x": np.zeros(2, "<f4")}, "do not cross"),
        ({"x": np.zeros((1,) * 5)}, "do not cross"),
        ({"x": {1, 2}}, "does not cross"),
        ({"x": np.array(["a"])}, "do not cross"),
    ],
)
def test_what_is_not_plain_data_is_not_encoded(value: dict, error: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(wire.WireError, match=error):
        wire.encode(value)


@pytest.mark.parametrize(
    "data, error",
    [
        (b"", "shorter than its tables"),
        (
            b"\x00\x00\x00\x04\x00\x00\x00\x02\x00\x00",
            "shorter than its tables",
        ),  # cut in its count
        (frame(table((9, (1,))), b"{}", b"\x00" * 8), "bad array description"),  # no dtype 9
        (frame(table((0, (1,) * 5)), b"{}", b"\x00" * 8), "bad array description"),  # 5 dimensions
        (
            frame(table((0, (2,))), b"{}", b"\x00" * 8),
            "shorter than its arrays",
        ),  # 2 floats, 1 sent
        (
            frame(table((0, (1 << 40, 1 << 40))), b"{}"),
            "shorter than its arrays",
        ),  # beyond MAX_ITEMS
        (frame(table((0, (1,))), b"{}", b"\x00" * 16), "longer than its arrays"),
        (struct.pack(">II", 99, 2) + table() + b"{}", "do not add up"),  # a table size that lies
        (
            struct.pack(">II", 4, 99) + table() + b"{}",
            "do not add up",
        ),  # JSON longer than the frame
        (frame(table(), b'{"x": NaN}'), "non-finite number NaN"),
        (frame(table(), b'{"x": -Infinity}'), "non-finite number -Infinity"),
        (frame(table(), b"[1, 2]"), "must hold an object"),
        (frame(table(), b'{"x": "\xff"}'), "not JSON"),
        (frame(table(), b"{" + b'"a":[' * 200_000 + b"]" * 200_000 + b"}"), "not JSON"),  # nesting
        (frame(table((2, (3,))), b'{"b": {"$a": 0}}', b"\x00\x01\x02"), "bytes other than 0 and 1"),
        (frame(table((1, (1,))), b'{"b": {"$a": 1}}', b"\x00" * 8), "unknown array reference 1"),
        (
            frame(table((1, (1,))), b'{"b": {"$a": true}}', b"\x00" * 8),
            "unknown array reference True",
        ),
    ],
)
def test_a_malformed_frame_is_refused(data: bytes, error: str) -> None:
    with pytest.raises(wire.WireError, match=error):
        wire.decode(data)


def test_only_a_lone_array_key_is_a_reference() -> None:
    data = frame(
        table((1, (1,))), b'{"r": {"$a": 0}, "d": {"$a": 0, "k": 1}}', struct.pack("<q", 7)
    )
    decoded = wire.decode(data)
    assert decoded["r"].tolist() == [7] and decoded["d"] == {"$a": 0, "k": 1}


@pytest.fixture()
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield ours, theirs
    ours.close()
    theirs.close()


@pytest.mark.parametrize("passes_fds", [False, True], ids=["pipe-like", "socket"])
@pytest.mark.parametrize("spin_s", [0.0, 0.001], ids=["blocking", "polling"])
def test_frames_are_read_whole_however_they_arrive(
    pair: tuple[socket.socket, socket.socket], passes_fds: bool, spin_s: float
) -> None:
    ours, theirs = pair
    reader = wire.FrameReader(theirs.fileno(), passes_fds, spin_s)
    two = wire.encode({"n": 1}) + wire.encode({"n": 2, "a": np.arange(3.0)})
    ours.sendall(two[:3])  # a length split across reads, then the rest with a second frame in it
    ours.sendall(two[3:])
    assert reader.read(1 << 20) == {"n": 1}
    second = reader.read(1 << 20)
    assert second["n"] == 2 and second["a"].tolist() == [0.0, 1.0, 2.0]
    ours.sendall(wire.encode({"n": 3})[:6])
    ours.shutdown(socket.SHUT_WR)
    with pytest.raises(wire.WireError, match="closed in the middle of a frame"):
        reader.read(1 << 20)


def test_a_clean_end_a_frame_over_the_limit_and_a_missing_descriptor(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    reader = wire.FrameReader(theirs.fileno(), passes_fds=True)
    ours.sendall(wire.encode({"pad": "x" * 100}))
    with pytest.raises(wire.WireError, match="exceeds the limit of 64"):
        reader.read(64)
    with pytest.raises(wire.WireError, match="a file descriptor was expected"):
        reader.take_fd()
    ours.shutdown(socket.SHUT_WR)
    fresh = wire.FrameReader(theirs.fileno())
    with pytest.raises(EOFError):
        fresh.read(1 << 20)


@pytest.mark.parametrize("spin_s", [0.0, 0.001], ids=["blocking", "polling"])
def test_a_descriptor_travels_with_its_frame(
    pair: tuple[socket.socket, socket.socket], tmp_path: Path, spin_s: float
) -> None:
    ours, theirs = pair
    (tmp_path / "f").write_text("shared")
    with open(tmp_path / "f", "rb") as handle:
        wire.send_fd(ours.fileno(), wire.encode({"op": "market"}), handle.fileno())
    reader = wire.FrameReader(theirs.fileno(), passes_fds=True, spin_s=spin_s)
    assert reader.read(1 << 20) == {"op": "market"}
    with open(reader.take_fd(), "rb") as passed:
        assert passed.read() == b"shared"


def test_a_polling_reader_takes_what_is_there_and_otherwise_blocks(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    reader = wire.FrameReader(theirs.fileno(), spin_s=0.0005)
    assert reader._poll() is None  # nothing came within its spin: the caller then blocks in a read
    ours.sendall(wire.encode({"n": 1}))
    # Bytes already there: taken without blocking
    assert reader._poll() == len(wire.encode({"n": 1}))
    reader.buffer.clear()
    # After the spin is over
    late = threading.Timer(0.05, lambda: ours.sendall(wire.encode({"n": 2})))
    late.start()
    assert reader.read(1 << 20) == {"n": 2}
    late.join()
    ours.shutdown(socket.SHUT_WR)
    with pytest.raises(EOFError):  # a closed channel ends a poll as it ends a blocking read
        reader.read(1 << 20)
    reader.close()


def test_a_reader_on_a_pipe_does_not_poll() -> None:
    read_end, write_end = os.pipe()
    try:
        reader = wire.FrameReader(read_end, spin_s=0.001)
        assert reader.spin_ns == 0 and reader.sock is None
        os.write(write_end, wire.encode({"n": 1}))
        assert reader.read(1 << 20) == {"n": 1}
    finally:
        os.close(read_end)
        os.close(write_end)


def test_plain_values_round_trip_by_type() -> None:
    value = {
        "f": 1.5,
        "nan": float("nan"),
        "inf": float("-inf"),
        "d": date(2024, 7, 1),
        "dt": datetime(2024, 7, 1, 9, 30),
        "ts": pd.Timestamp("2024-07-02"),
        "keys": {1: "one", 2.5: "half"},
        "np": [np.float64(2.0), np.int64(3), np.bool_(False)],
        "series": pd.Series([1.0, 2.0], index=["a", "b"]),
        "frame": pd.DataFrame({"c": [1, 2]}, index=["x", "y"]),
        "arr": np.array([1, 2], "<i4"),
        "objects": np.array(["u", "v"], dtype=object),
        "t": (1, "two"),
    }
    back = wire.from_plain(wire.decode(body({"v": wire.to_plain(value)}))["v"])
    assert back["f"] == 1.5 and np.isnan(back["nan"]) and back["inf"] == float("-inf")
    assert back["d"] == date(2024, 7, 1) and back["dt"] == datetime(2024, 7, 1, 9, 30)
    assert back["ts"] == datetime(2024, 7, 2) and back["keys"] == {1: "one", 2.5: "half"}
    assert (
        back["np"] == [2.0, 3, False] and back["t"] == [1, "two"] and back["objects"] == ["u", "v"]
    )
    pd.testing.assert_series_equal(back["series"], value["series"])
    pd.testing.assert_frame_equal(back["frame"], value["frame"])
    assert back["arr"].dtype.str == "<i8" and back["arr"].tolist() == [1, 2]


def test_a_dict_of_s_that_looks_like_a_tagged_value_stays_a_dict() -> None:
    # S's own {"$date": ...} or {"$float": "nan"} must not come back as a date or a float
    for value in (
        {"$date": "2024-07-01"},
        {"$float": "nan"},
        {"$a": 0},
        {"$series": {"index": [], "values": []}},
    ):
        sent = wire.encode({"v": wire.to_plain(value), "arr": np.zeros(1)})
        assert wire.from_plain(wire.decode(sent[4:])["v"]) == value


@pytest.mark.parametrize(
    "plain, error",
    [
        ({"$dict": [[1]]}, "must be a \\[key, value\\] pair"),
        ({"$dict": [[[1], 2]]}, "keys must be scalars"),
        ({"$dict": [[{"a": 1}, 2]]}, "keys must be scalars"),
    ],
)
def test_malformed_tagged_values_are_refused(plain: dict, error: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(wire.WireError, match=error):
        wire.from_plain(plain)


def test_nesting_is_bounded_both_ways() -> None:
    deep: list[object] = []
    cursor = deep
    for _ in range(wire.MAX_DEPTH + 2):
        cursor.append([])
        cursor = cursor[0]  # type: ignore[assignment]
    with pytest.raises(TypeError, match="nested too deeply"):
        wire.to_plain(deep)
    with pytest.raises(wire.WireError, match="nested too deeply"):
        wire.from_plain(json.loads(json.dumps(deep)))


def test_days_cross_as_midnight_nanoseconds() -> None:
    ns = wire.day_ns(date(2024, 7, 1))
    assert ns == pd.Timestamp("2024-07-01").value == wire.day_ns(datetime(2024, 7, 1, 15))
    assert wire.day_ns(np.datetime64("2024-07-01")) == ns and wire.ns_day(ns) == date(2024, 7, 1)


# --- the client: error answers by type -------------------------------------------------------
def test_s_errors_are_strategy_errors_of_their_builtin_type() -> None:
    raised = remote_error(
        {
            "kind": "strategy",
            "type": "Custom",
            "builtin": "ValueError",
            "message": "bad top_k",
            "where": ["strategies/m.py", 3],
        }
    )
    assert isinstance(raised, ValueError) and isinstance(raised, StrategyError)
    assert (raised.type_name, raised.where, raised.kind, str(raised)) == (
        "Custom",
        ["strategies/m.py", 3],
        "strategy",
        "bad top_k",
    )
    key = remote_error({"type": "KeyError", "builtin": "KeyError", "message": "'x'"})
    assert isinstance(key, LookupError) and str(key) == "'x'"  # the message as sent, not re-quoted
    assert type(remote_error({"builtin": "ValueError"})) is type(raised)  # one class per builtin
    for builtin in MAPPED:
        assert isinstance(remote_error({"builtin": builtin}), getattr(builtins, builtin))


@pytest.mark.parametrize(
    "builtin",
    [
        "AssertionError",
        "SystemExit",
        "KeyboardInterrupt",
        "BaseException",
        "Exception",
        "OSError",
        ["ValueError"],
        None,
        7,
    ],
)
def test_an_assertion_or_an_unmapped_type_is_a_plain_strategy_error(builtin: object) -> None:
    # an AssertionError of S must never count as a test's own assertion (a red test's proof)
    raised = remote_error({"type": "AssertionError", "builtin": builtin, "message": "from S"})
    assert type(raised) is StrategyError and not isinstance(raised, AssertionError)


@pytest.mark.parametrize("error", [None, "text", ["a"], 3])
def test_a_malformed_error_answer_is_a_request_error(error: object) -> None:
    raised = remote_error(error)
    assert type(raised) is StrategyError and raised.kind == "request" and "malformed" in str(raised)


def test_error_fields_are_bounded_and_checked() -> None:
    raised = remote_error(
        {
            "message": "m" * 10_000,
            "type": "T" * 1000,
            "where": "strategies/m.py:3",
            "kind": "root",
            "builtin": "RuntimeError",
        }
    )
    assert len(raised.message) == 4000 and len(raised.type_name) == 200
    assert raised.where is None and raised.kind == "strategy"
    assert remote_error({"message": {"nested": 1}}).message == "{'nested': 1}"


def test_a_channel_raises_what_its_answers_say(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    channel = Channel(theirs.fileno(), theirs.fileno(), timeout_s=30)
    ours.sendall(
        wire.encode({"value": 1})
        + wire.encode({"error": {"builtin": "TypeError", "message": "no"}})
        + wire.encode({"value": 3})
    )
    channel.send({"op": "a"})
    channel.send({"op": "b"})
    # The answers come in order: the first one is skipped
    with pytest.raises(TypeError, match="no"):
        channel.request({"op": "c"})
    assert channel.receive() == {"value": 3}
    ours.sendall(b"\x00\x00\x00\x02{}")  # a body too short for its tables: broken, not gone
    with pytest.raises(HostError, match="bad answer") as broken:
        channel.receive()
    assert not isinstance(broken.value, HostGone)
    ours.close()
    with pytest.raises(HostGone, match="closed its channel"):
        Channel(theirs.fileno(), theirs.fileno()).receive()


@pytest.mark.parametrize("text", ["", "x", "xyz" * 7])
def test_arrays_of_eight_byte_items_arrive_aligned(text: str) -> None:
    frame = wire.encode(
        {"note": text, "idx": np.arange(5), "w": np.ones(5) / 3, "flags": np.ones(3, bool)}
    )
    decoded = wire.decode(bytes(frame[4:]))  # a bytes object's data starts 16-aligned
    assert decoded["idx"].flags.aligned and decoded["w"].flags.aligned
    assert decoded["note"] == text and (decoded["w"] == np.ones(5) / 3).all()


DAY = 86_400 * 10**9
FIXED = {  # a replay's every decision: the engine's question and book, the host's answer
    "answer": {"idx": np.arange(3, dtype="<i8"), "w": np.array([0.25, 0.5, np.nan]), "unknown": []},
    "answer-with-schedule": {
        "idx": np.arange(0, dtype="<i8"),
        "w": np.zeros(0),
        "unknown": [],
        "due": np.array([False, False, True]),
    },
    "book": {
        "op": "book",
        "handle": 1,
        "portfolio_value": 1e8,
        "holdings": {"idx": np.array([4, 7], dtype="<i8"), "w": np.array([0.3, 0.2])},
    },
    "empty-book": {"op": "book", "handle": 2, "portfolio_value": 1.0, "holdings": {}},
    "question": {
        "op": "decide",
        "handle": 1,
        "as_of": 19_000 * DAY,
        "members": None,
        "rows": 26,
        "book": "next",
    },
    "question-with-schedule": {
        "op": "decide",
        "handle": 3,
        "as_of": 19_000 * DAY,
        "members": {"idx": np.array([0, 2, 5], dtype="<i8")},
        "rows": 26,
        "book": "next",
        "due": {
            "days": np.arange(19_001, 19_033, dtype="<i8") * DAY,
            "last": 19_001 * DAY,
            "first_only": True,
        },
    },
}


def as_json(message: dict) -> bytes:  # type: ignore[type-arg]
    """The frame body the general (JSON) encoding gives `message`."""
    fixed, wire._fixed = wire._fixed, lambda message: None
    try:
        return body(message)
    finally:
        wire._fixed = fixed


def same(left: object, right: object) -> bool:
    if isinstance(left, np.ndarray):
        return isinstance(right, np.ndarray) and (
            left.dtype,
            left.shape,
            left.tobytes(),
            left.flags.writeable,
        ) == (right.dtype, right.shape, right.tobytes(), right.flags.writeable)
    if isinstance(left, dict):
        return (
            isinstance(right, dict)
            and left.keys() == right.keys()
            and all(same(left[k], right[k]) for k in left)
        )
    return type(left) is type(right) and left == right


@pytest.mark.parametrize("name", sorted(FIXED))
def test_a_decisions_messages_cross_in_fixed_layouts_as_their_json_would(name: str) -> None:
    fixed = body(FIXED[name])
    # No JSON in it
    assert struct.unpack_from(">I", fixed)[0] == wire.FIXED_MARK and len(fixed) % 8 == 0
    assert same(wire.decode(fixed), wire.decode(as_json(FIXED[name])))


@pytest.mark.parametrize(
    "message",
    [
        {
            **FIXED["answer"],
            "unknown": ["600000.SH"],
        },  # a name without data: its answer goes as JSON
        {
            **FIXED["answer"],
            "idx": np.arange(6, dtype="<i8")[::2],
        },  # strided: JSON copies it contiguous
        {**FIXED["answer"], "w": np.zeros((3, 1))},
        {**FIXED["answer"], "extra": 1},
        {**FIXED["book"], "handle": True},
        {**FIXED["book"], "portfolio_value": 1},
        {**FIXED["question"], "book": "now"},
        {**FIXED["question"], "rows": 1 << 64},
        {
            **FIXED["question-with-schedule"],
            "due": {**FIXED["question-with-schedule"]["due"], "first_only": 1},
        },
    ],
    ids=lambda m: ",".join(sorted(m)),
)
def test_messages_outside_the_fixed_layouts_go_as_json(message: dict) -> None:  # type: ignore[type-arg]
    assert struct.unpack_from(">I", body(message))[0] != wire.FIXED_MARK
    assert same(wire.decode(body(message)), wire.decode(as_json(message)))


def fixed_frame(layout: int, fields: bytes, data: bytes = b"") -> bytes:
    return struct.pack(">II", wire.FIXED_MARK, layout) + fields + data


@pytest.mark.parametrize(
    "data, error",
    [
        (fixed_frame(9, b""), "unknown fixed layout 9"),
        (fixed_frame(wire.ANSWER, struct.pack("<q", 1)), "shorter than its fields"),
        (
            fixed_frame(wire.ANSWER, struct.pack("<qq", 1, -1), b"\x00" * 8),
            "shorter than its arrays",
        ),
        (
            fixed_frame(wire.ANSWER, struct.pack("<qq", 1, -1), b"\x00" * 24),
            "longer than its arrays",
        ),
        (fixed_frame(wire.ANSWER, struct.pack("<qq", -2, -1)), "out of range"),
        (fixed_frame(wire.ANSWER, struct.pack("<qq", 1 << 40, -1)), "out of range"),
        (
            fixed_frame(wire.ANSWER, struct.pack("<qq", 0, 2), b"\x01\x02" + b"\x00" * 6),
            "bytes other than 0 and 1",
        ),
        (
            fixed_frame(wire.ANSWER, struct.pack("<qq", 0, 2), b"\x01\x00\x07" + b"\x00" * 5),
            "padding holds data",
        ),
        (fixed_frame(wire.BOOK, struct.pack("<qdq", 1, float("nan"), -1)), "must be finite"),
        (
            fixed_frame(wire.QUESTION, struct.pack("<qqqqqq", 1, 0, 2, -1, -1, 5)),
            "names a last rebalance",
        ),
        (
            fixed_frame(wire.QUESTION, struct.pack("<qqqqqq", 1, 0, 2, 1, -1, 0)),
            "shorter than its arrays",
        ),
    ],
)
def test_a_malformed_fixed_frame_is_refused(data: bytes, error: str) -> None:
    with pytest.raises(wire.WireError, match=error):
        wire.decode(data)

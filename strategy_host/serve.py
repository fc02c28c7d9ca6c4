"""The strategy host: the one process where a workspace's code (S) runs, answering requests on a
channel.

Started in a jail (`python -I -S -B /host/strategy_host/serve.py`) with an empty environment and its
requests on stdin, answers on stdout. Its channel is a UNIX socket (a shared market's read-only
memory comes over it as a descriptor). The first frame (`init`, from the trusted parent) names the
import paths, the source packages and whether to measure coverage; from then on it serves `open`,
`append`, `decide`, `due`, `call`, `ping` and `finish`. It receives market rows only up to each
decision date, builds every MarketView from its own copy of `strategy_api`, and sends back plain
data. Nothing in it is trusted by the other side: the parent decodes and checks every answer itself.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import os
import struct
import sys
import traceback
from typing import Any, cast

REQUEST_LIMIT = 1 << 30  # the parent streams market rows; one frame may hold a long history
MAX_POLL_S = 0.01  # the longest the host polls for the next request before it sleeps in a read
_FDS: dict[str, int] = {}


def _read_init(fd: int) -> dict[str, Any]:
    """The first frame with the standard library alone (numpy is not importable before `site`)."""

    def exact(count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = os.read(fd, count - len(data))
            if not chunk:
                raise SystemExit(3)
            data += chunk
        return data

    (size,) = struct.unpack(">I", exact(4))
    if size > 1 << 20:
        raise SystemExit(3)
    body = exact(size)
    # An init frame holds no arrays: text after the table
    head, text = struct.unpack(">II", body[:8])
    message: dict[str, Any] = json.loads(body[8 + head : 8 + head + text].decode("utf-8"))
    if message.get("op") != "init":
        raise SystemExit(3)
    return message


class Host:
    """Dispatches requests; holds the open strategies (by handle) and their market histories."""

    def __init__(self, spec: dict[str, Any], reader: Any = None) -> None:
        from strategy_host import wire

        self.wire = wire
        # The channel's reader: a shared market's descriptor comes with `market`
        self.reader = reader
        self.packages = tuple(spec.get("packages") or ("strategies",))
        self.sessions: dict[int, dict[str, Any]] = {}
        self.calls = 0
        # A decision answered before its book was read
        self.unread_book: dict[str, Any] | None = None
        self.context = ""
        self.cov: Any = None
        measure = spec.get("coverage")
        if measure:
            import coverage

            self.cov = coverage.Coverage(
                data_file=measure["data_file"],
                config_file=False,
                branch=True,
                source=measure["source"],
            )
            self.cov.start()
        for name in spec.get("preimport") or ():  # module bodies run now, in the import context
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S112 - a module failing here fails when it is opened too
                continue

    # --- requests -----------------------------------------------------------------------------
    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        context = message.get("ctx")
        if self.cov is not None and isinstance(context, str) and context != self.context:
            self.cov.switch_context(context)
            self.context = context
        method = (
            getattr(self, f"op_{op}", None) if isinstance(op, str) and op.isidentifier() else None
        )
        if method is None:
            return {
                "error": {
                    "kind": "request",
                    "type": "UnknownOp",
                    "builtin": "ValueError",
                    "message": f"unknown request {op!r}",
                }
            }
        self.calls += 1
        answer: dict[str, Any] = method(message)
        return answer

    def op_ping(self, message: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "pid": os.getpid(), "calls": self.calls}

    def op_open(self, message: dict[str, Any]) -> dict[str, Any]:
        name = message.get("strategy")
        if not isinstance(name, str) or not name.isidentifier():
            raise RequestError(f"strategy name must be an identifier, got {name!r}")
        strategy = self._strategy(name)
        if getattr(strategy, "name", None) != name:
            raise RequestError(f"the strategy registered as {name!r} must be named {name!r}")
        raw = message.get("params") or {}
        if not isinstance(raw, dict):
            raise RequestError("params must be an object")
        params = strategy.Params(**self.wire.from_plain(raw))
        handle = len(self.sessions) + 1
        self.sessions[handle] = {"strategy": strategy, "params": params, "history": None}
        dump = getattr(params, "model_dump", None)
        # A declared calendar dependence, checked by the engine
        calendar = getattr(strategy, "calendar", None)
        return {
            "handle": handle,
            "name": name,
            "calendar": calendar if isinstance(calendar, str) else None,
            "params": self.wire.to_plain(dump(mode="json")) if callable(dump) else {},
        }

    def _strategy(self, name: str) -> Any:
        """The workspace's registry's `get(name)` when it has one, else `<package>/<name>.py`'s
        STRATEGY."""
        package = self.packages[0]
        try:
            registry = importlib.import_module(f"{package}.registry")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.registry":
                raise
            registry = None
        if registry is not None and callable(getattr(registry, "get", None)):
            return registry.get(name)
        strategy = getattr(importlib.import_module(f"{package}.{name}"), "STRATEGY", None)
        if strategy is None:
            raise RequestError(f"{package}/{name}.py must define STRATEGY")
        return strategy

    def _session(self, message: dict[str, Any]) -> dict[str, Any]:
        session = self.sessions.get(message.get("handle"))  # type: ignore[arg-type]
        if session is None:
            raise RequestError(f"no open strategy with handle {message.get('handle')!r}")
        return session

    def op_market(self, message: dict[str, Any]) -> dict[str, Any]:
        from strategy_api import History

        symbols, fields = message.get("symbols"), message.get("fields")
        if not (
            isinstance(symbols, list)
            and all(isinstance(s, str) for s in symbols)
            and isinstance(fields, list)
            and all(isinstance(f, str) for f in fields)
        ):
            raise RequestError("market needs lists of symbol and field names")
        session = self._session(message)
        shared = message.get("shared")
        if shared is None:
            session["history"] = History(symbols, fields, int(message.get("capacity") or 256))
            return {"ok": True}
        if self.reader is None or not isinstance(shared, int) or shared < 1:
            raise RequestError("a shared market needs its capacity and a descriptor on a socket")
        session["history"] = History.over(
            symbols, fields, *self._mapped(shared, len(symbols), fields)
        )
        return {"ok": True}

    def _mapped(self, capacity: int, width: int, fields: list[str]) -> tuple[Any, dict[str, Any]]:
        """The rows another process writes, mapped read-only: days, then a (days x symbols) array a
        field."""
        import mmap

        import numpy as np

        fd = self.reader.take_fd()
        try:
            size = 8 * capacity * (1 + width * len(fields))
            if os.fstat(fd).st_size < size:
                raise RequestError("the shared market is smaller than its description")
            memory = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        days = np.frombuffer(memory, "<i8", capacity, 0).view("datetime64[ns]")
        data = {
            f: np.frombuffer(
                memory, "<f8", capacity * width, 8 * capacity * (1 + i * width)
            ).reshape(capacity, width)
            for i, f in enumerate(fields)
        }
        return days, data

    def _history(self, session: dict[str, Any]) -> Any:
        if session["history"] is None:
            raise RequestError("no market opened for this strategy (send `market` first)")
        return session["history"]

    def op_append(self, message: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        history = self._history(self._session(message))
        days, values = message.get("days"), message.get("values")
        if (
            not isinstance(days, np.ndarray)
            or days.dtype.str != "<i8"
            or not isinstance(values, dict)
        ):
            raise RequestError("append needs `days` (int64 ns) and `values` (an array per field)")
        history.append(days.astype("datetime64[ns]"), values)
        return {"rows": history.rows}

    def op_decide(self, message: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        from strategy_api import Holdings

        session = self._session(message)
        if "market" in message:
            self.op_market({**message["market"], "handle": message.get("handle")})
        rows = message.get("rows")
        if isinstance(rows, int) and not isinstance(rows, bool):
            self._history(session).extend(rows)
        elif isinstance(rows, dict):
            self.op_append({**rows, "handle": message.get("handle")})
        elif rows is not None:
            raise RequestError("rows must be a row count (shared market) or {days, values}")
        history = self._history(session)
        members = self._members(history, message.get("members"))
        as_of = message.get("as_of")
        if as_of is not None and not isinstance(as_of, int):
            raise RequestError("as_of must be an int (ns since the epoch at midnight)")
        book = self._book(history, message)
        try:
            view = history.view(
                lambda: book()[1], members, None if as_of is None else self._stamp(as_of)
            )
            answer = session["strategy"].target_weights(
                view, Holdings(lambda: book()[0]), session["params"]
            )
            # S's own mapping, turned into plain data right here (the parent checks it again)
            # a dict subclass is read through dict's own methods, a float subclass through float's:
            # never an override reporting other weights than those the object holds
            pairs = dict.items(answer) if isinstance(answer, dict) else answer.items()
            keys, values = (
                (list(answer), list(answer.values()))
                if type(answer) is dict
                else map(list, zip(*pairs, strict=True))
                if len(pairs)
                else ([], [])
            )
            found = list(map(history.positions.get, keys, itertools.repeat(-1)))
            # A found
            unknown = [k for k, i in zip(keys, found, strict=True) if i < 0] if -1 in found else []
            if not all(isinstance(k, str) for k in unknown):  # key is a symbol
                raise TypeError("target_weights must map symbols (str) to weights")
            # plain floats as they are (what float.__float__ gives them); anything else through
            # held_float
            weights = (
                np.array(values, dtype="<f8")
                if all(type(v) is float for v in values)
                else np.fromiter(map(self.wire.held_float, values), dtype="<f8", count=len(values))
            )
            reply: dict[str, Any] = {
                "idx": np.array(found, dtype="<i8"),
                "w": weights,
                "unknown": unknown,
            }
            # Answered before the book is waited for: it may still be on its way
            if "due" in message:
                reply["due"] = self.op_due({**message["due"], "handle": message.get("handle")})[
                    "due"
                ]
        except BaseException:
            # the book's frame is read whether S looked at it or not (the channel stays in step)
            book()
            raise
        if message.get("book") == "next" and not book.kept:
            # S never asked for the book, so the answer cannot depend on it: it goes first and the
            # book's frame is read after it (`serve`), so the engine finds the answer waiting
            # instead of waiting for this host to be woken by its book.
            self.unread_book = message
        else:
            book()
        return reply

    def _book(self, history: Any, message: dict[str, Any]) -> Any:
        """What gives the decision's (holdings, portfolio value), read once: from the request, or
        (`"book": "next"`) from the next frame, which the engine sends while this host decides."""
        return BookOnce(
            lambda: self._book_of(
                history, self._next_book(message) if message.get("book") == "next" else message
            )
        )

    def read_unread_book(self) -> None:
        """Read the book frame of the last decision, whose answer went without it (S never
        asked)."""
        question, self.unread_book = self.unread_book, None
        if question is not None:
            self._next_book(question)

    def _next_book(self, question: dict[str, Any]) -> dict[str, Any]:
        if self.reader is None:
            raise RequestError("a decision whose book follows needs a channel")
        try:
            message: dict[str, Any] = self.reader.read(REQUEST_LIMIT)
        except (EOFError, self.wire.WireError) as exc:
            raise ChannelLost(str(exc)) from None
        if message.get("op") != "book" or message.get("handle") != question.get("handle"):
            raise ChannelLost(f"expected the book of this decision, got {message.get('op')!r}")
        return message

    def _book_of(self, history: Any, message: dict[str, Any]) -> tuple[dict[str, float], float]:
        value = message.get("portfolio_value", 1.0)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise RequestError("portfolio_value must be a number")
        return self._holdings(history, message.get("holdings")), float(value)

    def _stamp(self, value: int) -> Any:
        import pandas as pd

        stamp = pd.Timestamp(value)
        if value % self.wire.NS_PER_DAY:
            raise RequestError("as_of must be a midnight")
        return stamp

    def _members(self, history: Any, members: Any) -> Any:
        """Members as positions (from the engine) or names (from a test); None: every symbol."""
        import numpy as np

        if (
            isinstance(members, dict)
            and isinstance(members.get("idx"), np.ndarray)
            and members["idx"].dtype.str == "<i8"
        ):
            return members["idx"]
        return self._names(history, members)

    def _names(self, history: Any, members: Any) -> list[str] | None:
        import numpy as np

        if members is None:
            return None
        if isinstance(members, dict) and isinstance(members.get("idx"), np.ndarray):
            return cast(list[str], history.names[members["idx"]].tolist())
        if isinstance(members, list) and all(isinstance(m, str) for m in members):
            return members
        raise RequestError("members must be null, a list of names or {idx: int64 array}")

    def _holdings(self, history: Any, holdings: Any) -> dict[str, float]:
        if not holdings:
            return {}
        weights = holdings.get("w")
        names = (
            holdings["names"]
            if "names" in holdings
            else self._names(history, {"idx": holdings.get("idx")})
        )
        if names is None or weights is None or len(names) != len(weights):
            raise RequestError("holdings need as many names (or idx) as weights")
        return dict(zip(names, weights.tolist(), strict=True))

    def op_due(self, message: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        strategy = self._session(message)["strategy"]
        days, last = message.get("days"), message.get("last")
        if not isinstance(days, np.ndarray) or days.dtype.str != "<i8":
            raise RequestError("due needs `days` (int64 ns)")
        last_day = None if last is None else self.wire.ns_day(last)
        answers = []
        for value in days.tolist():
            due = bool(strategy.rebalance_due(self.wire.ns_day(value), last_day))
            answers.append(due)
            if due and message.get("first_only"):
                break
        return {"due": np.array(answers, dtype="|b1")}

    def _inside(self, module: str) -> bool:
        return any(module == p or module.startswith(p + ".") for p in self.packages)

    def op_call(self, message: dict[str, Any]) -> dict[str, Any]:
        target = message.get("target")
        module_name, _, attribute = (
            target.partition(":") if isinstance(target, str) else ("", "", "")
        )
        parts = attribute.split(".")
        if not self._inside(module_name) or not all(
            p.isidentifier() and not p.startswith("_") for p in parts + module_name.split(".")
        ):
            raise RequestError(
                f"call target must be a public function of {', '.join(self.packages)} "
                f"as 'module:name', got {target!r}"
            )
        value: Any = importlib.import_module(module_name)
        for part in parts:
            value = getattr(value, part)
            if isinstance(value, type(sys)) and not self._inside(value.__name__):
                raise RequestError(
                    f"call target {target!r} goes through the module {value.__name__}, "
                    "which is not strategy code"
                )
        if not callable(value) or not self._inside(str(getattr(value, "__module__", "") or "")):
            raise RequestError(
                f"call target {target!r} is not a function or class defined in "
                f"{', '.join(self.packages)}"
            )
        args = self.wire.from_plain(message.get("args") or [])
        kwargs = self.wire.from_plain(message.get("kwargs") or {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise RequestError("call needs a list of args and an object of kwargs")
        return {"value": self.wire.to_plain(value(*args, **kwargs))}

    def op_finish(self, message: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        data = None
        if self.cov is not None:
            self.cov.stop()
            self.cov.save()
            path = self.cov.get_data().data_filename()
            with open(path, "rb") as handle:
                data = np.frombuffer(handle.read(), dtype="|u1")
        return {"coverage": data, "calls": self.calls, "finished": True}


class BookOnce:
    """A decision's (holdings, portfolio value), read on the first call and kept (a failure too:
    every later call fails alike); `kept` says whether it was read."""

    def __init__(self, read: Any) -> None:
        self.read = read
        self.kept: list[Any] = []

    def __call__(self) -> tuple[dict[str, float], float]:
        kept = self.kept
        if not kept:
            try:
                kept.append(self.read())
            except BaseException as exc:  # noqa: BLE001 - kept: every later read fails alike
                kept.append(exc)
        if isinstance(kept[0], BaseException):
            raise kept[0]
        return cast("tuple[dict[str, float], float]", kept[0])


class RequestError(Exception):
    """A request the host cannot serve (not the strategy's fault)."""


class ChannelLost(BaseException):
    """The channel closed or went out of step inside a request: the host stops (S cannot catch it
    as an Exception, and a later read of the book raises it again)."""


def _error(exc: BaseException, kind: str) -> dict[str, Any]:
    builtin = next(
        (c.__name__ for c in type(exc).__mro__ if c.__module__ == "builtins"), "Exception"
    )
    where = None
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith("/workspace/"):
            where = [frame.filename[len("/workspace/") :], frame.lineno]
            break
    return {
        "error": {
            "kind": kind,
            "type": type(exc).__name__,
            "builtin": builtin,
            "message": _one_line(exc)[:2000],
            "where": where,
        }
    }


def _one_line(exc: BaseException) -> str:
    """The message in one line; a pydantic ValidationError as `field: problem (got value)`, the way
    oomrl.errors.validation_problems says it (this file imports nothing of oomrl)."""
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ != "ValidationError" or not callable(errors):
        return str(exc)
    problems = []
    for error in errors()[:5]:
        where = ".".join(str(part) for part in error.get("loc", ())) or "value"
        given = (
            f" (got {error['input']!r})"
            if "input" in error and not isinstance(error["input"], dict)
            else ""
        )
        problems.append(f"{where}: {error.get('msg', '')}{given}")
    return "; ".join(problems)


def _lost(exc: ChannelLost) -> int:
    """Say why the channel is lost (when the other side still listens): the host's exit code."""
    from strategy_host import wire

    with contextlib.suppress(wire.WireError):  # the other side is gone
        wire.write_frame(_FDS["out"], wire.encode(_error(exc, "request")))
    return 2


def serve(spec: dict[str, Any]) -> int:
    """Answer requests until the channel closes or `finish` is asked."""
    from strategy_host import wire

    poll = spec.get("poll_s")
    reader = wire.FrameReader(
        _FDS["in"],
        passes_fds=True,
        spin_s=min(float(poll), MAX_POLL_S) if isinstance(poll, (int, float)) and poll > 0 else 0.0,
    )
    host = Host(spec, reader)
    wire.write_frame(
        _FDS["out"],
        wire.encode({"ready": True, "pid": os.getpid(), "python": list(sys.version_info[:3])}),
    )
    while True:
        try:
            message = reader.read(REQUEST_LIMIT)
        except EOFError:
            host.op_finish({})
            return 0
        except wire.WireError as exc:
            wire.write_frame(_FDS["out"], wire.encode(_error(exc, "request")))
            return 2
        try:
            reply = host.handle(message)
        except ChannelLost as exc:
            return _lost(exc)
        except RequestError as exc:
            reply = _error(exc, "request")
        except Exception as exc:  # noqa: BLE001 - whatever S raises is its answer, by type
            traceback.print_exc()  # to stderr, which the parent keeps the tail of
            reply = _error(exc, "strategy")
        try:
            frame = wire.encode(reply)
        except (wire.WireError, TypeError, ValueError) as exc:
            frame = wire.encode(_error(exc, "strategy"))
        wire.write_frame(_FDS["out"], frame)
        try:
            host.read_unread_book()
        except ChannelLost as exc:
            return _lost(exc)
        if message.get("op") == "finish":
            return 0


def main() -> int:
    # The channel (one UNIX socket on fds 0 and 1) moves off them, so what S prints goes to
    # stderr, not into the protocol.
    _FDS["in"], _FDS["out"] = os.dup(0), os.dup(1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    spec = _read_init(_FDS["in"])
    sys.path[:0] = [p for p in spec.get("paths", []) if isinstance(p, str)]
    sys.path.extend(p for p in spec.get("site", []) if isinstance(p, str))
    return serve(spec)


if __name__ == "__main__":
    sys.exit(main())

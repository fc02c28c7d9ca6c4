"""Strategies run in a strategy host: the engine's only way to reach a workspace's code (S).

A StrategySource names a strategy in a workspace. `open` starts its host, in the same jail as the
gate's. It gives a StrategyRunner bound to one market. The runner writes market rows into memory
the host maps read-only. It writes them only up to each decision date. So a later row is not
written yet when S decides. It asks for the schedule in batches. It checks the weights it gets
back itself (plain data: symbol positions and floats). Nothing of S is imported here.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from oomrl.errors import StrategyFailedError, StrategyHostError
from oomrl.portfolio.market import MarketFrames
from strategy_api.helpers import WEIGHT_TOLERANCE
from strategy_host import wire
from strategy_host.client import HostError, StrategyError

DUE_CHUNK = 32  # sessions asked about at once: the schedule's answer up to its first trade day
PAGE = os.sysconf("SC_PAGE_SIZE")
MADV_POPULATE_WRITE = 23  # linux/mman.h (Python's mmap module does not name it)
PREFAULT_ROWS = DUE_CHUNK  # rows whose pages are mapped in ahead of the rows written
PREFAULT_CHUNK = 256  # rows mapped in at once
# Calendar dependences a strategy may declare (oomrl.portfolio.probes)
CALENDARS = ("weekly", "monthly")
UNSAFE_JAIL = "none (OOMRL_UNSAFE_NO_JAIL=1: strategy code ran on the host, unjailed)"


@dataclass(frozen=True)
class Decision:
    """One decision as a runner asked it (session t, book, members). Also the weights it
    returned."""

    t: int
    held: np.ndarray  # market positions of the held symbols
    held_weights: np.ndarray  # their weights of the NAV
    nav: float
    members: list[str] | None
    weights: np.ndarray  # the validated target weight of every market symbol


class StrategyRunner(Protocol):
    """A strategy bound to one market: its schedule and its decisions, by session index."""

    name: str
    jail: str

    def due(self, t: int, last: date | None) -> bool:
        """Does the strategy want to trade on session t, having last traded on `last`?"""

    def weights(
        self,
        t: int,
        held: np.ndarray,
        held_weights: np.ndarray,
        nav: float,
        members: list[str] | None,
    ) -> np.ndarray:
        """Target weights per market symbol for session t, from data up to session t-1."""

    def close(self) -> None:
        """Release the runner (stop its host)."""


class StrategySource(Protocol):
    """A strategy that can be opened on a market: a workspace's, or a test's own."""

    @property
    def name(self) -> str:
        """The strategy's name (strategies/<name>.py)."""

    def open(self, params: Mapping[str, Any] | None, market: MarketFrames) -> StrategyRunner:
        """A runner for `market` with these parameters (validated by the strategy's Params)."""


def weights_array(
    name: str, day: date, market: MarketFrames, idx: Any, values: Any, unknown: Any
) -> np.ndarray:
    """Validated long-only weights per market symbol from a decision's plain answer.

    The rules of strategy_api.check_weights apply: finite, >= 0, sum <= 1, zeros dropped. They
    apply to arrays the receiving side decoded itself. Symbols must be the market's.
    """
    count = len(market.symbols)
    if not (
        isinstance(idx, np.ndarray)
        and isinstance(values, np.ndarray)
        and idx.dtype.str == "<i8"
        and values.dtype.str == "<f8"
        and idx.shape == values.shape
        and idx.ndim == 1
        and isinstance(unknown, list)
        and all(isinstance(u, str) for u in unknown)
        and len(unknown) == int(np.count_nonzero(idx < 0))
        and not (idx >= count).any()
    ):
        raise StrategyHostError(f"strategy {name}: the host answered {day} with malformed weights")
    if len(unknown):
        raise StrategyFailedError(
            f"strategy {name} targets symbols without market data: {unknown[:5]}"
        )
    seen = np.zeros(count, dtype=bool)
    seen[idx] = True  # a symbol given twice marks one place for two answers
    if np.count_nonzero(seen) != len(idx):
        raise StrategyHostError(f"strategy {name}: the host answered {day} with a symbol twice")
    bad = ~np.isfinite(values) | (values < -WEIGHT_TOLERANCE)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise StrategyFailedError(
            f"strategy {name} returned invalid weights for {day}: weight of "
            f"{market.symbols[idx[first]]} must be finite and >= 0, got "
            f"{values[first]}"
        )
    kept = values > WEIGHT_TOLERANCE
    total = sum(values[kept].tolist())  # summed in order, as check_weights sums a dict
    if total > 1.0 + WEIGHT_TOLERANCE:
        raise StrategyFailedError(
            f"strategy {name} returned invalid weights for {day}: weights sum "
            f"to {total:.6f} > 1 (long-only, no leverage)"
        )
    weights = np.zeros(count)
    weights[idx[kept]] = values[kept]
    return weights


class SharedMarket:
    """The market rows a host may read: a memory file filled row by row, up to a decision date.

    Layout: the session days (int64 ns), then one (sessions x symbols) float64 array per field.
    The host gets a read-only descriptor. So it can neither write the rows nor see an unwritten
    one.
    """

    def __init__(self, market: MarketFrames) -> None:
        self.market = market
        self.fields = list(market.panels.arrays)
        capacity, self.width = len(market.days), len(market.symbols)
        self.size = 8 * capacity * (1 + self.width * len(self.fields))
        self.memory, self.readonly, reused = _acquire(self.size)
        self.days = np.frombuffer(self.memory, "<i8", capacity, 0)
        self.data = {
            f: np.frombuffer(self.memory, "<f8", capacity * self.width, self._offset(i, 0)).reshape(
                capacity, self.width
            )
            for i, f in enumerate(self.fields)
        }
        self.written = 0
        # rows [0, faulted) have their pages mapped in; -1: the kernel cannot. A reused file's are
        # all.
        self.faulted = capacity if reused else 0

    def _offset(self, field: int, row: int) -> int:
        """Byte offset of `row` of the field at position `field` in the memory file."""
        return 8 * (len(self.days) * (1 + field * self.width) + row * self.width)

    def write(self, stop: int) -> None:
        """Write the rows [written, stop)."""
        if stop <= self.written:
            return
        lo = self.written
        self.days[lo:stop] = self.market.day_ns[lo:stop]
        for name, array in self.market.panels.arrays.items():
            self.data[name][lo:stop] = array[lo:stop]
        self.written = stop

    def prefault(self, stop: int) -> None:
        """Map in the pages of the rows up to `stop` without writing them.

        Called while the host works. The pages stay zeros, as any unwritten row is. So a later
        write finds them ready. A fresh memory file's pages are allocated on first touch, one fault
        each. That is most of the cost of writing a replay's rows. MADV_POPULATE_WRITE (Linux 5.14)
        allocates a range in one call. It does not change what the range holds. Where the kernel
        lacks it, pages fault in when they are first written, as before.
        """
        if stop <= self.faulted or self.faulted < 0:
            return
        lo = self.faulted
        stop = min(max(stop, lo + PREFAULT_CHUNK), len(self.days))  # few large calls: the kernel
        # maps a range of pages cheaper than one by one
        spans = [(8 * lo, 8 * stop)] + [
            (self._offset(i, lo), self._offset(i, stop)) for i in range(len(self.fields))
        ]
        try:
            for start, end in spans:
                start -= start % PAGE
                self.memory.madvise(MADV_POPULATE_WRITE, start, end - start)
        except OSError:
            self.faulted = -1
            return
        self.faulted = stop

    def close(self, reuse: bool = True) -> None:
        """Give the memory back. It is kept for the next market of its size once its host stopped.

        It is zeroed before it is handed out again. `reuse` False unmaps it: a host that may still
        run holds it."""
        self.days = self.data = None  # type: ignore[assignment]
        _release(self.size, self.memory, self.readonly, reuse)


# Memory files of closed markets, kept for the next market of the same size. A fresh file's pages
# are allocated as its rows are first written. That costs ~1 ms per MiB, a tenth of a W1 replay.
# A kept one's are in place. A kept file is zeroed whole before it is handed out again. So no row
# of an earlier market (a later date, another window) reaches the next host. Only exact sizes are
# reused, so a host can map nothing beyond the market it is given.
POOL_FILES = 2
POOL_BYTES = 512 << 20
_POOL: list[tuple[int, Any, int]] = []  # (size, mapping, read-only descriptor)
_POOL_LOCK = threading.Lock()


def _acquire(size: int) -> tuple[Any, int, bool]:
    """A writable mapping of a memory file of `size` zero bytes and its read-only descriptor.
    Also whether it was kept from an earlier market."""
    import mmap

    with _POOL_LOCK:
        kept = next((entry for entry in _POOL if entry[0] == size), None)
        if kept is not None:
            _POOL.remove(kept)
    if kept is not None:
        np.frombuffer(kept[1], np.uint8)[:] = 0  # in place: the pages stay mapped
        return kept[1], kept[2], True
    fd = os.memfd_create("oomrl-market", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        memory = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        readonly = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)
    return memory, readonly, False


def _release(size: int, memory: Any, readonly: int, reuse: bool) -> None:
    with _POOL_LOCK:
        if reuse and size <= POOL_BYTES - sum(entry[0] for entry in _POOL):
            _POOL.append((size, memory, readonly))
            dropped = _POOL[:-POOL_FILES] if len(_POOL) > POOL_FILES else []
            del _POOL[: len(dropped)]
        else:
            dropped = [(size, memory, readonly)]
    for _, mapping, descriptor in dropped:
        with contextlib.suppress(OSError):
            os.close(descriptor)
        with contextlib.suppress(BufferError):  # a view still alive: the mapping goes with it
            mapping.close()


@dataclass
class HostedRunner:
    """A StrategyRunner over a running strategy host (one per replay or rebalance)."""

    host: Any  # guardrails.sandbox.strategyhost.HostProcess
    handle: int
    name: str
    market: MarketFrames
    jail: str
    shared: SharedMarket | None = None
    sent: int = 0  # market rows [0, sent) are written for the host
    decisions: list[Decision] | None = None  # when a list, every decision is appended to it
    schedule_ahead: bool = True  # ask for the schedule after each decision along with it
    _due: dict[str, Any] = field(default_factory=dict)
    _members: dict[int, tuple[list[str], np.ndarray]] = field(default_factory=dict)
    waiting: Question | None = None  # a question whose book the host still waits for.
    # The calendar dependence S declares (its `calendar`). The date probe keeps it.
    calendar: str = "weekly"

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        self._in_step()
        return cast("dict[str, Any]", self._guard(lambda: self.host.request(message)))

    def _in_step(self) -> None:
        """Refuse a request while the host waits for a question's book. It would read the
        request as the book."""
        if self.waiting is not None and not self.waiting.sent:
            raise StrategyHostError(
                f"strategy {self.name}: a request was made before the book of "
                f"session {self.waiting.t} was sent"
            )

    def _guard(self, exchange: Callable[[], Any]) -> Any:
        """What `exchange` with the host returns; its failures as this strategy's errors."""
        try:
            return exchange()
        except StrategyError as exc:
            raise StrategyFailedError(
                f"strategy {self.name} raised {exc.type_name}: {exc.message}"
                + (f" ({exc.where[0]}:{exc.where[1]})" if exc.where else "")
            ) from None
        except HostError as exc:
            raise StrategyHostError(f"strategy {self.name}: {exc}") from None

    def _send_rows(self, stop: int) -> None:
        """Write rows up to `stop` ahead of the decision on session `stop`. The host is told
        then."""
        assert self.shared is not None
        self.shared.write(stop)
        self.sent = max(self.sent, stop)

    def due(self, t: int, last: date | None) -> bool:
        cached = self._due
        if (
            cached
            and cached["last"] == last
            and cached["from"] <= t < cached["from"] + len(cached["flags"])
        ):
            return bool(cached["flags"][t - cached["from"]])
        stop = min(t + DUE_CHUNK, len(self.market.days))
        answer = self._call(
            {
                "op": "due",
                "handle": self.handle,
                "days": self.market.day_ns[t:stop],
                "first_only": True,
                "last": None if last is None else wire.day_ns(last),
            }
        )
        self._remember(t, last, answer.get("due"), stop - t)
        return bool(self._due["flags"][0])

    def _remember(self, start: int, last: date | None, flags: Any, asked: int) -> None:
        if not (
            isinstance(flags, np.ndarray)
            and flags.dtype.str == "|b1"
            and flags.ndim == 1
            and 1 <= len(flags) <= asked
            and (flags[-1] or len(flags) == asked)
            and not flags[:-1].any()
        ):
            raise StrategyHostError(
                f"strategy {self.name}: the host answered the schedule malformed"
            )
        self._due = {"from": start, "last": last, "flags": flags}
        if flags[-1]:
            # Rows up to the next decision date, ahead of time
            self._send_rows(start + len(flags) - 1)

    def weights(
        self,
        t: int,
        held: np.ndarray,
        held_weights: np.ndarray,
        nav: float,
        members: list[str] | None,
    ) -> np.ndarray:
        return self.ask(t, held, held_weights, nav, members)()

    def ask(
        self,
        t: int,
        held: np.ndarray,
        held_weights: np.ndarray,
        nav: float,
        members: list[str] | None,
    ) -> Callable[[], np.ndarray]:
        """Send the question of `weights` and return what takes its answer.

        The caller works while the host decides. The answer is checked when taken, as `weights`
        checks it."""
        return self.question(t, members, book_follows=False).book(held, held_weights, nav)

    def next_due(self, t: int, last: date | None) -> int | None:
        """The first session >= t the schedule already answered as due after `last`.

        None when the answer in hand does not reach that far. Nothing is asked of the host."""
        cached = self._due
        if not cached or cached["last"] != last or not cached["flags"][-1]:
            return None
        due = cached["from"] + len(cached["flags"]) - 1
        return due if due >= t else None

    def question(self, t: int, members: list[str] | None, book_follows: bool = True) -> Question:
        """Write the rows up to session t and ask for its weights. The book follows
        (`Question.book`).

        With `book_follows` the question goes now. The host starts deciding while the caller
        trades and marks its way to the decision date. The host reads the book when S first needs
        it.
        """
        self._in_step()
        market = self.market
        day_ns = market.day_ns
        message: dict[str, Any] = {
            "op": "decide",
            "handle": self.handle,
            "as_of": int(day_ns[t - 1]),
            "members": None if members is None else {"idx": self._member_positions(members)},
        }
        self._send_rows(t)
        message["rows"] = t
        stop = min(t + 1 + DUE_CHUNK, len(day_ns))
        # After trading on t, the next question is whether t+1.. is due
        if self.schedule_ahead and t + 1 < stop:
            message["due"] = {
                "days": day_ns[t + 1 : stop],
                "last": int(day_ns[t]),
                "first_only": True,
            }
        question = Question(self, t, members, message, stop)
        if book_follows:
            message["book"] = "next"
            self._guard(lambda: self.host.send(message))
            self.waiting = question
        return question

    def _member_positions(self, members: list[str]) -> np.ndarray:
        # Membership.on hands out one list per effective date
        cached = self._members.get(id(members))
        if cached is not None and cached[0] is members:
            return cached[1]
        positions = self.market.positions
        found = np.array(sorted(positions[s] for s in members if s in positions), dtype="<i8")
        self._members[id(members)] = (members, found)
        return found

    def close(self) -> None:
        self.host.close()
        if self.shared is not None:
            self.shared.close()


@dataclass
class Question:
    """A decision asked of a host whose book (holdings, NAV) is still to be sent.

    `book` sends it and returns what takes the answer. `drop` answers it with any book and
    forgets the weights."""

    runner: HostedRunner
    t: int
    members: list[str] | None
    message: dict[str, Any]
    stop: int  # the schedule's question runs up to this session
    sent: bool = False

    def book(self, held: np.ndarray, held_weights: np.ndarray, nav: float) -> Answer:
        """Send the book the decision starts from; calling the result takes the checked weights."""
        runner, t, message = self.runner, self.t, self.message
        if self.sent:
            raise StrategyHostError(
                f"strategy {runner.name}: the book of session {t} was sent already"
            )
        self.sent = True
        book = {
            "portfolio_value": float(nav),
            "holdings": {
                "idx": np.asarray(held, dtype="<i8"),
                "w": np.asarray(held_weights, dtype="<f8"),
            },
        }
        if message.get("book") == "next":
            runner._guard(
                lambda: runner.host.send(
                    {"op": "book", "handle": runner.handle, **book}, answered=False
                )
            )
        else:
            runner._guard(lambda: runner.host.send({**message, **book}))
        if runner.shared is not None:
            runner.shared.prefault(t + PREFAULT_ROWS)

        return Answer(self, held, held_weights, nav)

    def drop(self) -> None:
        """Answer a question the caller no longer needs (its replay halted first).

        The host gets an empty book. Its weights are read and forgotten, so the channel stays in
        step."""
        if self.sent:
            return
        self.sent = True
        runner = self.runner
        try:
            runner._guard(
                lambda: runner.host.send(
                    {"op": "book", "handle": runner.handle, "portfolio_value": 1.0, "holdings": {}},
                    answered=False,
                )
            )
            runner._guard(runner.host.receive)
        except StrategyFailedError:  # what S made of a question nobody needs is nobody's error
            pass


@dataclass
class Answer:
    """What takes a decision's answer.

    `reply` receives it and remembers the schedule it carries. So the next question can go out at
    once. Calling it also checks the weights and returns them."""

    question: Question
    held: np.ndarray
    held_weights: np.ndarray
    nav: float
    reply_in_hand: dict[str, Any] | None = None

    def reply(self) -> dict[str, Any]:
        """The host's answer, received once; its schedule (`due`) is remembered when it has one."""
        if self.reply_in_hand is None:
            question = self.question
            runner, t = question.runner, question.t
            reply = runner._guard(runner.host.receive)
            self.reply_in_hand = reply
            if "due" in question.message:
                runner._remember(
                    t + 1, runner.market.days[t], reply.get("due"), question.stop - t - 1
                )
        return self.reply_in_hand

    def __call__(self) -> np.ndarray:
        reply = self.reply()
        question = self.question
        runner, t, market = question.runner, question.t, question.runner.market
        weights = weights_array(
            runner.name,
            market.days[t - 1],
            market,
            reply.get("idx"),
            reply.get("w"),
            reply.get("unknown"),
        )
        if runner.decisions is not None:
            runner.decisions.append(
                Decision(
                    t,
                    self.held.copy(),
                    self.held_weights.copy(),
                    float(self.nav),
                    None if question.members is None else list(question.members),
                    weights,
                )
            )
        return weights


def jail_lock(unsafe_no_jail: bool = False) -> tuple[Any, str]:
    """The lock strategy hosts run under, and how outputs name it. Refuse when there is none."""
    from guardrails.errors import GateSetupError
    from guardrails.sandbox import HashOnlyLock, select_lock

    try:
        lock = select_lock(None)
        return lock, lock.backend
    except GateSetupError as exc:
        if unsafe_no_jail:
            return HashOnlyLock(), UNSAFE_JAIL
        raise StrategyHostError(
            f"strategy code runs only in a jail and none can be made here ({exc}); "
            "install bubblewrap, or set OOMRL_UNSAFE_NO_JAIL=1 to run it unjailed "
            "(every output then says so)"
        ) from None


@dataclass(frozen=True)
class WorkspaceStrategy:
    """Strategy `name` in the source trees of the workspace at `root` (a version's folder)."""

    root: Path
    name: str
    unsafe_no_jail: bool = False

    def start(self, coverage: bool = False) -> tuple[Any, str]:
        """A started host for this workspace and the name of its jail."""
        from guardrails.sandbox import HOST_POLL_S, HostSpec, start_host

        lock, jail = jail_lock(self.unsafe_no_jail)
        sources, memory = _contract_of(self.root)
        try:
            return start_host(
                lock, HostSpec(Path(self.root), sources, coverage, memory, poll_s=HOST_POLL_S)
            ), jail
        except (HostError, OSError) as exc:
            raise StrategyHostError(f"strategy {self.name}: {exc}") from None
        except Exception as exc:  # GateSetupError: the jail itself could not be made
            if type(exc).__name__ == "GateSetupError":
                raise StrategyHostError(f"strategy {self.name}: {exc}") from None
            raise

    def open(
        self,
        params: Mapping[str, Any] | None,
        market: MarketFrames,
        *,
        record: bool = False,
        schedule_ahead: bool = True,
    ) -> HostedRunner:
        """A runner in a new host. `record` keeps its decisions (`runner.decisions`).

        `schedule_ahead` False asks nothing along with a decision. The host then sees no row after
        it."""
        host, jail = self.start()
        try:
            handle, _, calendar = open_in(host, self.name, params)
            shared = SharedMarket(market)
            runner = HostedRunner(
                host,
                handle,
                self.name,
                market,
                jail,
                shared,
                decisions=[] if record else None,
                schedule_ahead=schedule_ahead,
                calendar=calendar,
            )
            try:
                host.channel.send_with_fd(
                    {
                        "op": "market",
                        "handle": handle,
                        "shared": len(market.days),
                        "symbols": [str(s) for s in market.symbols],
                        "fields": shared.fields,
                    },
                    shared.readonly,
                )
                host.channel.receive()
            except (HostError, StrategyError) as exc:
                shared.close(reuse=False)  # the host got the descriptor and is not stopped yet
                raise StrategyHostError(
                    f"strategy {self.name}: the host could not map the market: {exc}"
                ) from None
            return runner
        except BaseException:
            host.close()
            raise

    def digest(self) -> str:
        """sha256 of the workspace's source trees (paths and bytes): what this version's code is."""
        import hashlib

        sources, _ = _contract_of(self.root)
        digest = hashlib.sha256()
        for tree in sources:
            for path in sorted((Path(self.root) / tree).rglob("*.py")):
                if "__pycache__" not in path.parts:
                    digest.update(
                        f"{path.relative_to(self.root)}\0".encode() + path.read_bytes() + b"\0"
                    )
        return digest.hexdigest()

    def check_params(self, params: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Each parameter set as the strategy's Params model normalizes it; OomrlError naming the
        bad one."""
        host, _ = self.start()
        try:
            normalized = []
            for one in params:
                try:
                    normalized.append(open_in(host, self.name, one)[1])
                except StrategyFailedError as exc:
                    raise StrategyFailedError(f"{exc} (parameters {dict(one)})") from None
            return normalized
        finally:
            host.close()


def open_in(
    host: Any, name: str, params: Mapping[str, Any] | None
) -> tuple[int, dict[str, Any], str]:
    """Open strategy `name` in a started host.

    Returns its handle, its normalized parameters and the calendar it declares ("weekly" unless it
    says "monthly")."""
    try:
        answer = host.request(
            {"op": "open", "strategy": name, "params": wire.to_plain(dict(params or {}))}
        )
    except StrategyError as exc:
        if exc.kind == "request" or exc.type_name in (
            "ModuleNotFoundError",
            "ImportError",
            "KeyError",
        ):
            raise StrategyFailedError(
                f"no strategy {name!r} in this workspace: {exc.message}"
            ) from None
        raise StrategyFailedError(
            f"invalid params for {name}: {validation_line(exc.message)}"
            if exc.type_name == "ValidationError"
            else f"strategy {name} failed to load: {exc.type_name}: {exc.message}"
        ) from None
    except HostError as exc:
        raise StrategyHostError(f"strategy {name}: {exc}") from None
    handle, normalized, calendar = (
        answer.get("handle"),
        answer.get("params"),
        answer.get("calendar") or "weekly",
    )
    if not isinstance(handle, int) or not isinstance(normalized, dict):
        raise StrategyHostError(f"strategy {name}: the host answered `open` malformed")
    if calendar not in CALENDARS:
        raise StrategyFailedError(
            f"strategy {name} declares calendar {calendar!r}; known: {', '.join(CALENDARS)}"
        )
    return handle, wire.from_plain(normalized), calendar


def validation_line(message: str) -> str:
    """pydantic's multi-line ValidationError text as one line: `field: problem; field: problem`."""
    parts, where = [], ""
    for line in message.splitlines()[1:]:
        if line.strip() and not line.startswith(" "):
            where = line.strip()  # the field (location) the next problem is about
        elif line.startswith("  ") and not line.startswith("    ") and line.strip():
            problem = line.strip().split(" [type=")[0]
            parts.append(f"{where}: {problem}" if where else problem)
            where = ""
    return "; ".join(parts) or " ".join(message.split())


def _contract_of(root: Path) -> tuple[tuple[str, ...], int]:
    """The workspace's source trees and memory limit (its contract, else the defaults)."""
    from guardrails.errors import GateSetupError
    from guardrails.workspace import load_contract

    try:
        contract = load_contract(Path(root))
        return contract.source, contract.memory_limit_mb
    except GateSetupError:
        return ("strategies",), 4096

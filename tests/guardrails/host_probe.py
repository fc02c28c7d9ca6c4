"""S planted in a strategy host's workspace by test_strategyhost.py: it reports what it can see and
do.

Not a test module: its text is written to `strategies/probe.py` of a tmp workspace and called
through a real host (`call("strategies.probe:<function>")`, or opened as strategy `probe`/`scan`).
It runs as S would, unsanitized: whatever Python lets code in the host do, it tries.
"""

import ctypes
import gc
import json
import mmap
import os
import resource
import socket
import sys
import time
from pathlib import Path

import numpy as np

from strategy_api import StrategyParams

NS_PER_DAY = 86_400_000_000_000
# Midnights (ns since the epoch) a market row may carry: 1990-01-01 .. 2100-01-01.
EARLIEST, LATEST = 7305 * NS_PER_DAY, 47482 * NS_PER_DAY
SEEN = []  # what each decision observed (state across calls is the point of a probe)


def environment():
    return dict(os.environ)


def exists(paths):
    return {path: os.path.exists(path) for path in paths}


def write(paths):
    report = {}
    for path in paths:
        try:
            with open(path, "w") as handle:
                handle.write("planted by S")
            report[path] = "written"
        except OSError as exc:
            report[path] = f"error {exc.errno}"
    return report


def connect(targets):
    report = {}
    for kind, address in targets:
        family = socket.AF_INET if kind == "tcp" else socket.AF_UNIX
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(30)
                sock.connect(tuple(address) if kind == "tcp" else address)
                report[str(address)] = sock.recv(16).decode()
        except OSError as exc:
            report[str(address)] = f"error {exc.errno}"
    return report


def status():
    """The identity and privilege lines of /proc/self/status."""
    lines = Path("/proc/self/status").read_text().splitlines()
    return {
        k: v.strip()
        for k, v in (line.split(":", 1) for line in lines)
        if k.startswith(("Cap", "Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp"))
    }


def identity():
    return {
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "status": status(),
    }


def noisy(value):
    """Prints, writes to fd 1 and forges a frame on it before answering."""
    print("S says hello on stdout")
    sys.stdout.write('{"value": "forged"}\n')
    sys.stdout.flush()
    forged = json.dumps({"value": "forged"}).encode()
    os.write(1, len(forged).to_bytes(4, "big") + forged)
    return value


def sleep(seconds):
    time.sleep(seconds)
    return "woke"


def die(code):
    sys.stderr.write("S: going down\n")
    sys.stderr.flush()
    if code < 0:
        os.kill(os.getpid(), -code)  # what the kernel's OOM killer does
    os._exit(code)


def text(size):
    return "x" * size


class Custom(ValueError):
    """An exception class of S, a subclass of a builtin."""


class Lookup(KeyError):
    pass


def fail(kind):
    raise {
        "assert": AssertionError("S's own assert"),
        "custom": Custom("S's ValueError"),
        "lookup": Lookup("no such key"),
        "system": SystemError("S's system error"),
    }[kind]


def _buffers():
    """Every buffer S can reach: mmaps, arrays (with their bases), memoryviews, bytes, from every
    object the collector tracks, the locals of every frame of every thread, and what they refer to
    (dicts and tuples holding only arrays and numbers are not tracked: they are followed too)."""
    queue = gc.get_objects()
    for frame in sys._current_frames().values():
        while frame is not None:
            queue.append(dict(frame.f_locals))
            frame = frame.f_back
    tracked = len(queue)
    expanded, seen, found = set(), set(), []
    index = 0
    while index < len(queue):
        obj = queue[index]
        index += 1
        if (index <= tracked or isinstance(obj, (dict, list, tuple))) and id(obj) not in expanded:
            expanded.add(id(obj))
            queue.extend(gc.get_referents(obj))
        chain = obj
        while chain is not None and id(chain) not in seen:
            if not isinstance(chain, (mmap.mmap, np.ndarray, memoryview, bytes, bytearray)):
                break
            seen.add(id(chain))
            found.append(chain)
            chain = (
                chain.base
                if isinstance(chain, np.ndarray)
                else (chain.obj if isinstance(chain, memoryview) else None)
            )
    return found


def _latest(buffer):
    """The latest market midnight in `buffer`'s bytes, read as int64 at every byte offset."""
    if isinstance(buffer, np.ndarray):
        if buffer.dtype.kind == "M":
            buffer = buffer.astype("datetime64[ns]").view("<i8")
        if buffer.dtype.hasobject:
            return None
        data = np.ascontiguousarray(buffer).view(np.uint8).ravel()
    else:
        data = np.frombuffer(buffer, np.uint8) if len(buffer) else np.zeros(0, np.uint8)
    best = None
    for offset in range(min(8, len(data))):
        usable = (len(data) - offset) // 8 * 8
        words = data[offset : offset + usable].view("<i8")
        dates = words[(words >= EARLIEST) & (words <= LATEST) & (words % NS_PER_DAY == 0)]
        if len(dates):
            best = max(best or 0, int(dates.max()))
    return best


def _max(buffers):
    found = [_latest(buffer) for buffer in buffers]
    return max((f for f in found if f is not None), default=None)


def latest_reachable(view, everything):
    """The latest date in the market mapping, in the view (its arrays and their bases, its private
    state) and anywhere in the host's memory that Python reaches (`everything`: _buffers())."""
    own = [value for value in vars(view).values()] + list(vars(view).get("_arrays", {}).values())
    chains = []
    for value in own:
        while isinstance(value, np.ndarray):
            chains.append(value)
            value = value.base
        if isinstance(value, memoryview):
            chains += [value, value.obj]
    return {
        "mapping": _max([b for b in everything if isinstance(b, mmap.mmap)]),
        "view": _max(
            [c for c in chains if isinstance(c, (np.ndarray, mmap.mmap, memoryview, bytes))]
        ),
        "anywhere": _max(everything),
    }


def _market_mapping():
    for line in Path("/proc/self/maps").read_text().splitlines():
        if "oomrl-market" in line:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            return start, end, line.split()[0]
    return None


def write_market(everything):
    """Every way to write the market memory mapped into the host; what each did."""
    report = {}
    shared = [b for b in everything if isinstance(b, mmap.mmap)]
    try:
        shared[0][0:8] = b"\xff" * 8
        report["mmap"] = "written"
    except (TypeError, IndexError) as exc:
        report["mmap"] = f"refused {type(exc).__name__}"
    arrays = [
        b
        for b in everything
        if isinstance(b, np.ndarray)
        and isinstance(b.base, memoryview)
        and isinstance(b.base.obj, mmap.mmap)
    ]
    try:
        arrays[0].setflags(write=True)
        report["array"] = "writable"
    except (ValueError, IndexError) as exc:
        report["array"] = f"refused {type(exc).__name__}"
    mapping = _market_mapping()
    if mapping is None:
        return {**report, "mapping": "none"}
    start, end, span = mapping
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    code = libc.mprotect(start, end - start, mmap.PROT_READ | mmap.PROT_WRITE)
    report["mprotect"] = "writable" if code == 0 else f"error {ctypes.get_errno()}"
    try:
        fd = os.open(f"/proc/self/map_files/{span}", os.O_RDWR)
        again = mmap.mmap(
            fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
        )
        again[0:8] = (123 * NS_PER_DAY).to_bytes(8, "little")
        report["map_files"] = "written"
    except OSError as exc:
        report["map_files"] = f"error {exc.errno}"
    return report


def _origin(value):
    """Where an array of the view comes from: its base chain, and whether it can be made
    writable."""
    kinds, array = [], value
    while value is not None and len(kinds) < 8:
        kinds.append(type(value).__name__)
        value = getattr(value, "base", None)
    try:
        array.view().setflags(write=True)
        kinds.append("can be made writable")
    except ValueError:
        kinds.append("read-only")
    return kinds


def fingerprint():
    """What S can observe of the process it runs in (nothing of it should tell gate from
    production)."""
    limits = {
        name: resource.getrlimit(getattr(resource, name))
        for name in dir(resource)
        if name.startswith("RLIMIT_")
    }
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "hostname": os.uname().nodename,
        "status": status(),
        "limits": limits,
        "argv": sys.argv,
        "path": sys.path,
        "flags": list(sys.flags),
        "root": sorted(os.listdir("/")),
        "workspace": sorted(os.listdir(os.getcwd())),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "cpus": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "umask": os.umask(0o022),
        "tracer": sys.gettrace() is not None,
        "coverage": "coverage" in sys.modules,
        "tmp": sorted(os.listdir("/tmp")),
        "fds": sorted(os.listdir("/proc/self/fd")),
    }


def last():
    return SEEN[-1]


def seen():
    return SEEN


def _book_shape(view, holdings):
    """What S can tell of the book it was handed, beyond its numbers: types and the names on them
    (the engine sends the book after the question, a test within it: S must not tell which)."""

    def names(value):
        return sorted(a for a in dir(value) if not a.startswith("__"))

    return {
        "holdings": [type(holdings).__name__, names(holdings), type(holdings._weights).__name__],
        "value": [type(view.portfolio_value).__name__, type(view._portfolio_value).__name__],
        "view": names(view),
    }


class Probe:
    """Records what it observes at each decision, and decides on momentum alone."""

    name = "probe"
    Params = StrategyParams
    every = 7  # calendar days between decisions

    def rebalance_due(self, day, last):
        return last is None or (day - last).days >= self.every

    def target_weights(self, view, holdings, params):
        close = view.values("close")
        SEEN.append(
            {
                "as_of": int(view.as_of.value),
                **fingerprint(),
                "view": {"close": _origin(close), "days": _origin(view.dates.values)},
                "book": _book_shape(view, holdings),
            }
        )
        if len(close) < 4:
            return {}
        score = close[-1] / close[-4]
        order = sorted(range(len(score)), key=lambda i: (-score[i], str(view.symbols[i])))
        return {str(view.symbols[i]): 0.45 for i in order[:2] if np.isfinite(score[i])}


class Scan(Probe):
    """At each decision: the latest date in every byte it can reach, and what writing the market
    did."""

    name = "scan"
    every = 20

    def target_weights(self, view, holdings, params):
        everything = _buffers()
        SEEN.append(
            {
                "as_of": int(view.as_of.value),
                "latest": latest_reachable(view, everything),
                "write": write_market(everything),
            }
        )
        return {}


STRATEGY = Probe()

"""What judged code may reach: modules, builtins, dunders, and where attribute chains lead.

Strategy code (S) is pure computation over a MarketView. So the sanitizer checks it against an
allow-list rather than a list of tricks. The list holds the modules it may import, the builtins it
may name, the ordinary dunders. Attribute chains that start at an imported module are resolved
against the real modules. Those are imported here; S itself never is. Three kinds of chain are
refused wherever they appear.
- A chain that reaches a module outside the list.
- A chain that reaches a private member of a library.
- A chain that reaches a risky member of an allowed library. The few such members read or write
  files, touch native memory or evaluate strings.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from guardrails.static.members import MEMBERS

if TYPE_CHECKING:
    from guardrails.workspace import GuardContract

PURE_STDLIB = frozenset(
    {
        "__future__",
        "abc",
        "bisect",
        "cmath",
        "collections",
        "copy",
        "dataclasses",
        "datetime",
        "decimal",
        "enum",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "logging",
        "math",
        "numbers",
        "operator",
        "re",
        "statistics",
        "string",
        "typing",
        "typing_extensions",
    }
)
LIBRARIES = frozenset({"numpy", "pandas", "pydantic"})
# The strategy API S builds on (MarketView, helpers): trusted, outside S, in every host's jail.
SOURCE_LIBRARIES = frozenset({"strategy_api"})
# Modules allowed for a few constants only (version-compatibility checks and numeric limits).
RESTRICTED = {
    "sys": frozenset(
        {"version_info", "hexversion", "maxsize", "float_info", "int_info", "byteorder"}
    )
}
# Tests may also use the test tools and read their own data fixtures.
TEST_MODULES = frozenset(
    {
        "pytest",
        "hypothesis",
        "unittest",
        "json",
        "csv",
        "io",
        "pathlib",
        "textwrap",
        "contextlib",
        "strategy_host",
    }
)
# Members of allowed modules refused by name, one family a line-group.
# They are matched by object too. So every alias, re-export and `from x import y as z` is caught.
# The principle: pure computation needs none of these. It reads or writes no files and imports
# nothing by name. It evaluates no strings, exposes no native memory, and leaves the process's
# global state alone.
DENIED_COMMON = (
    # reads or writes files, or probes the file system when a value is validated
    "numpy.fromregex",
    "pydantic.FilePath",
    "pydantic.DirectoryPath",
    "pydantic.NewPath",
    "pydantic.SocketPath",
    "pandas.read_pickle",
    "pandas.read_clipboard",
    "pandas.read_sql",
    "pandas.read_sql_query",
    "pandas.read_sql_table",
    "pandas.read_gbq",
    "pandas.read_html",
    "pandas.read_xml",
    "pandas.to_pickle",
    "io.open",
    "io.open_code",
    "io.FileIO",
    "logging.config",
    "logging.handlers",
    "logging.FileHandler",
    "logging.basicConfig",
    "logging.root",
    "logging.lastResort",
    "pathlib.Path.home",
    "pathlib.Path.cwd",
    "hypothesis.extra.ghostwriter",
    "hypothesis.database",
    "numpy.info",
    "numpy.get_include",
    # imports a module or an object by name
    "pydantic.ImportString",
    "pydantic.deprecated",
    "pydantic.tools",
    "pydantic.parse",
    "pydantic.v1",
    "pytest.register_assert_rewrite",
    "pytest.importorskip",
    # evaluates strings (forward references are `eval`, format fields reach attributes)
    "typing.get_type_hints",
    "typing.ForwardRef",
    "typing_extensions.get_type_hints",
    "typing_extensions.get_annotations",
    "typing_extensions.evaluate_forward_ref",
    "typing_extensions.ForwardRef",
    "pandas.eval",
    "string.Formatter",
    # exposes native memory
    "numpy.ctypeslib",
    "numpy.f2py",
    "numpy.lib.stride_tricks.as_strided",
    "numpy.memmap",
    # changes or reports the process's global state (options, logging classes, decimal context)
    "numpy.show_config",
    "numpy.show_runtime",
    "numpy.test",
    "pandas.test",
    "pandas.show_versions",
    "pandas.set_option",
    "pandas.options",
    "logging.setLoggerClass",
    "logging.setLogRecordFactory",
    "logging.captureWarnings",
    "logging.shutdown",
    "decimal.setcontext",
    "decimal.getcontext",
    "decimal.DefaultContext",
    # the test runner's own machinery
    "pytest.main",
    "pytest.hookimpl",
    "pytest.hookspec",
    "pytest.Config",
    "pytest.PytestPluginManager",
    "unittest.main",
)
DENIED_SOURCE = DENIED_COMMON + (
    # S reads no file at all. T may read its own data through a rooted path (testrules).
    "numpy.load",
    "numpy.loadtxt",
    "numpy.genfromtxt",
    "numpy.fromfile",
    "numpy.save",
    "numpy.savez",
    "numpy.savez_compressed",
    "numpy.savetxt",
    "numpy.lib.npyio",
    "numpy.lib.format",
    "numpy.testing",
    "numpy.DataSource",
    "pandas.io",
    "pandas.testing",
    "pandas.plotting",
    "pandas.util",
    "pandas.HDFStore",
    "pandas.ExcelFile",
    "pandas.ExcelWriter",
    # byte_bounds: a view's addresses (page-aligned in a replay's mapping, heap ones in a test)
    "numpy.lib.array_utils",
)
# Keywords that turn a reader into code execution (a pickle is a program).
# They are refused in S and T.
PICKLE_KEYWORDS = frozenset({"allow_pickle"})
_READERS = re.compile(r"^pandas\.read_")
# Attribute names refused on any object. They name modules that give the host away.
# Or they name logging state that tells a test run from production.
ESCAPE_ATTRIBUTES = frozenset(
    {
        "os",
        "sys",
        "builtins",
        "subprocess",
        "inspect",
        "gc",
        "ctypes",
        "importlib",
        "socket",
        "pathlib",
        "shutil",
        "tempfile",
        "threading",
        "_thread",
        "multiprocessing",
        "atexit",
        "pickle",
        "marshal",
        "traceback",
        "linecache",
        "runpy",
        "pkgutil",
        "posix",
        "site",
        "sysconfig",
        "faulthandler",
        "tracemalloc",
        "mmap",
        "_io",
        "_imp",
        "_ctypes",
        "handlers",
        "manager",
        "loggerDict",
        "strides",
        # An array's base is the whole buffer its rows are cut from. In a replay its size tells
        # production from the gate. The replay's buffer covers all its sessions, zeros after the
        # decision date. The gate's buffers end there.
        "base",
        # frames and tracebacks: from a generator's frame, `f_back` reaches the calling test's
        # locals
        "f_back",
        "f_locals",
        "f_globals",
        "f_code",
        "f_builtins",
        "f_trace",
        "f_lineno",
        "tb_frame",
        "tb_next",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        # pydantic's deprecated readers: `parse_raw(..., proto="pickle", allow_pickle=True)`
        # unpickles
        "parse_raw",
        "parse_obj_as",
        "parse_file_as",
    }
)
# Attribute names refused on any object in S only.
# For a test or the gate, a view's arrays are cut from the host's own writable buffers.
# In a replay they are cut from the read-only shared mapping.
# Making one writable succeeds in the one and fails in the other. So it tells them apart.
VIEW_WRITES = frozenset({"setflags", "writeable"})
# Methods that read or write files on any object (pandas, numpy, pydantic, matplotlib).
IO_METHODS = frozenset(
    {
        "to_csv",
        "to_pickle",
        "to_parquet",
        "to_feather",
        "to_hdf",
        "to_sql",
        "to_excel",
        "to_stata",
        "to_xml",
        "to_orc",
        "to_gbq",
        "to_clipboard",
        "tofile",
        "dump",
        "savefig",
        "parse_file",
        "write_text",
        "write_bytes",
        "read_text",
        "read_bytes",
        "open",
        "unlink",
        "rmdir",
        "mkdir",
        "touch",
        "symlink_to",
        "hardlink_to",
        "iterdir",
        "glob",
        "rglob",
        "chmod",
    }
)
# Writers whose only argument may be a path: `df.to_json()` alone returns text.
PATH_WRITERS = frozenset({"to_json", "to_html", "to_latex", "to_markdown", "to_string"})
SAFE_BUILTINS = frozenset(
    {
        "abs",
        "aiter",
        "all",
        "anext",
        "any",
        "ascii",
        "bin",
        "bool",
        "bytearray",
        "bytes",
        "callable",
        "chr",
        "classmethod",
        "complex",
        "delattr",
        "dict",
        "divmod",
        "enumerate",
        "filter",
        "float",
        "format",
        "frozenset",
        "getattr",
        "hasattr",
        "hash",
        "hex",
        "id",
        "int",
        "isinstance",
        "issubclass",
        "iter",
        "len",
        "list",
        "map",
        "max",
        "min",
        "next",
        "object",
        "oct",
        "ord",
        "pow",
        "print",
        "property",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "setattr",
        "slice",
        "sorted",
        "staticmethod",
        "str",
        "sum",
        "super",
        "tuple",
        "type",
        "zip",
        "True",
        "False",
        "None",
        "NotImplemented",
        "Ellipsis",
        "__name__",
        "__doc__",
    }
)
DENIED_BUILTINS = frozenset(
    {
        "open",
        "exec",
        "eval",
        "compile",
        "__import__",
        "input",
        "breakpoint",
        "exit",
        "quit",
        "help",
        "globals",
        "locals",
        "vars",
        "dir",
        "memoryview",
        "copyright",
        "credits",
        "license",
        "SystemExit",
        "KeyboardInterrupt",
        "GeneratorExit",
        "BaseException",
        "__build_class__",
        "__loader__",
        "__spec__",
        "__builtins__",
        "__file__",
        "__cached__",
        "__package__",
        "__path__",
    }
)
ALLOWED_DUNDERS = frozenset(
    {
        "__init__",
        "__post_init__",
        "__new__",
        "__name__",
        "__qualname__",
        "__doc__",
        "__class__",
        "__module__",
        "__all__",
        "__slots__",
        "__version__",
        "__members__",
        "__args__",
        "__origin__",
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__hash__",
        "__repr__",
        "__str__",
        "__len__",
        "__iter__",
        "__next__",
        "__contains__",
        "__getitem__",
        "__call__",
        "__enter__",
        "__exit__",
        "__bool__",
        "__add__",
        "__sub__",
        "__mul__",
        "__truediv__",
        "__floordiv__",
        "__mod__",
        "__neg__",
        "__abs__",
        "__radd__",
        "__rmul__",
        "__format__",
        "__future__",
        "__main__",
        "__setattr__",
    }
)
# Dunder methods that run at class creation, on attribute misses or at garbage collection.
HOOK_DEFINITIONS = frozenset(
    {
        "__init_subclass__",
        "__set_name__",
        "__class_getitem__",
        "__getattr__",
        "__getattribute__",
        "__del__",
        "__dir__",
        "__instancecheck__",
        "__subclasscheck__",
        "__prepare__",
    }
)
REFLECTION = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# Library callables that reach attributes by a name given as data: called directly, literal names.
NAMED_REFLECTION = frozenset({"operator.attrgetter", "operator.methodcaller"})
# Methods that evaluate an expression string (pandas): the string must be a literal.
EVALUATING_METHODS = frozenset({"eval", "query"})


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


@dataclass(frozen=True)
class Policy:
    """The capabilities of one role: S under code-patch, T under test-gen."""

    modules: frozenset[str]
    own: frozenset[str]
    denied: tuple[str, ...]
    role: str = "source"
    sources: frozenset[str] = frozenset({"strategies"})

    @classmethod
    def for_contract(cls, contract: GuardContract, phase: str) -> Policy:
        """S's policy in code-patch, T's in test-gen, with the workspace's extra imports."""
        sources = frozenset(tree.split("/")[0] for tree in contract.source)
        tests = frozenset(tree.split("/")[0] for tree in contract.tests)
        role = "tests" if phase == "test-gen" else "source"
        return cls.of(role, sources, contract.allow_imports, tests)

    @classmethod
    def of(
        cls,
        role: str,
        sources: frozenset[str] = frozenset({"strategies"}),
        extra: frozenset[str] = frozenset(),
        tests: frozenset[str] = frozenset({"tests"}),
    ) -> Policy:
        """The default policy of a role: S's own packages for S; T's own (never S's) for T.

        T reaches S only through strategy_host.
        """
        base = (
            PURE_STDLIB
            | LIBRARIES
            | extra
            | (TEST_MODULES if role == "tests" else SOURCE_LIBRARIES)
        )
        own = tests if role == "tests" else sources
        return cls(base, own, DENIED_SOURCE if role == "source" else DENIED_COMMON, role, sources)

    @property
    def denied_builtins(self) -> frozenset[str]:
        """Builtins refused to this role (tests may open their data files and know their path)."""
        return DENIED_BUILTINS - {"open", "__file__"} if self.role == "tests" else DENIED_BUILTINS

    @property
    def dunders(self) -> frozenset[str]:
        """Dunders this role may use."""
        return ALLOWED_DUNDERS | {"__file__"} if self.role == "tests" else ALLOWED_DUNDERS

    def is_own(self, module: str) -> bool:
        return module.split(".")[0] in self.own

    def allows(self, module: str) -> bool:
        """May this module be imported (S's own packages always; library privates never)?"""
        if self.is_own(module) or module in RESTRICTED:
            return True
        head = module.split(".")[0]
        if head not in self.modules and module not in self.modules:
            return False
        parts = module.split(".")
        return (
            not any(part.startswith("_") and not is_dunder(part) for part in parts[1:])
            and not self.denies(module)
            and all(
                parts[i] in MEMBERS.get(".".join(parts[:i]), {parts[i]})
                for i in range(1, len(parts))
            )
        )

    def denies(self, dotted: str) -> bool:
        """A denied member or module (by name; objects are compared in `chain_problem`)."""
        return any(dotted == d or dotted.startswith(d + ".") for d in self.denied) or bool(
            self.role == "source" and _READERS.match(dotted)
        )

    def chain_problem(self, module: str, attributes: list[str]) -> str | None:
        """Why `module.a.b...` may not be used, or None; resolved against the real modules."""
        if self.is_own(module):
            return None
        value: Any = _resolve(module)
        for attribute in attributes:
            if not isinstance(value, ModuleType):
                return None  # past a module, only the attribute-name rules apply
            name = f"{value.__name__}.{attribute}"
            allowed = RESTRICTED.get(value.__name__)
            if allowed is not None and attribute not in allowed:
                return (
                    f"{name} is not one of {value.__name__}'s allowed constants "
                    f"({', '.join(sorted(allowed))})"
                )
            if attribute.startswith("_") and not is_dunder(attribute):
                return f"{name} is private to the library"
            if self.denies(name) or id(getattr(value, attribute, None)) in _denied_ids(self.denied):
                return (
                    f"{name} is refused by name (it reads or writes files, imports by name, "
                    "evaluates strings, exposes native memory or changes process-wide state)"
                )
            members = MEMBERS.get(value.__name__)
            if (
                members is not None
                and attribute not in members
                and not is_dunder(attribute)
                and not _is_ufunc(getattr(value, attribute, None))
            ):
                return (
                    f"{name} is not one of the members of {value.__name__} judged code may "
                    "use (pure computation only)"
                )
            value = getattr(value, attribute, None)
            if isinstance(value, ModuleType) and not self.allows(value.__name__):
                return f"{name} is the module {value.__name__}, which may not be used"
        return None

    def resolves(self, module: str, name: str | None = None) -> bool:
        """Does `import module` / `from module import name` succeed here (library modules only)?"""
        if self.is_own(module):
            return False  # S is never imported by the judge: its imports cannot be confirmed
        value = _resolve(module)
        return value is not None and (name is None or hasattr(value, name))

    def imported(self, module: str, name: str) -> tuple[str, str]:
        """(target, kind) bound by `from module import name`: a module under its real name."""
        if self.is_own(module):
            return f"{module}.{name}", "object"
        value = getattr(_resolve(module), name, None)
        if isinstance(value, ModuleType):
            return value.__name__, "module"
        return f"{module}.{name}", "object"


def _is_ufunc(value: Any) -> bool:
    """A numpy ufunc (element-wise arithmetic): allowed without a list."""
    return type(value).__name__ == "ufunc" and type(value).__module__ == "numpy"


@functools.cache
def _import(module: str) -> Any:
    """The allowed library module itself (None when it is not installed or fails to import)."""
    try:
        return importlib.import_module(module)
    except Exception:  # noqa: BLE001 - a missing optional library resolves to nothing
        return None


@functools.cache
def _resolve(dotted: str) -> Any:
    """The object a dotted name names: the module itself, else an attribute of its parent."""
    value = _import(dotted)
    if value is not None:
        return value
    head, _, attribute = dotted.rpartition(".")
    return getattr(_resolve(head), attribute, None) if head else None


@functools.cache
def _denied_ids(denied: tuple[str, ...]) -> frozenset[int]:
    """ids of the denied objects that exist here (aliases elsewhere resolve to the same object)."""
    found = set()
    for dotted in denied:
        module, _, attribute = dotted.rpartition(".")
        value = getattr(_resolve(module), attribute, None) if module else None
        if value is not None and not isinstance(value, (int, str, bool)):
            found.add(id(value))
    return frozenset(found)

"""The sanitizer's tables: banned names per rule, suspicious attributes and the rule messages."""

from __future__ import annotations

import re

# Modules (and dotted names) whose mere use is a finding, by rule.
BANNED: dict[str, tuple[str, ...]] = {
    "sanitizer.test_framework": ("pytest", "_pytest", "unittest", "coverage", "doctest", "pytest_cov",
                                 "pluggy", "nose", "hypothesis", "py"),
    "sanitizer.dynamic_import": ("importlib", "imp", "pkgutil", "runpy", "zipimport", "modulefinder",
                                 "__import__"),
    "sanitizer.ctypes": ("ctypes", "_ctypes", "cffi"),
    "sanitizer.frame": ("inspect", "linecache", "traceback", "gc", "sys._getframe",
                        "sys._current_frames", "sys.exc_info", "sys.exception", "sys.last_traceback"),
    "sanitizer.exit": ("atexit", "signal", "faulthandler", "os._exit", "os.abort", "os.kill",
                       "os.killpg", "sys.exit", "exit", "quit", "SystemExit", "KeyboardInterrupt"),
    "sanitizer.subprocess": ("subprocess", "pty", "multiprocessing", "os.system", "os.popen",
                             "os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp",
                             "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
                             "concurrent.futures.ProcessPoolExecutor", "threading.Thread",
                             "threading.Timer", "_thread"),
    "sanitizer.network": ("socket", "http", "urllib", "urllib3", "requests", "httpx", "aiohttp",
                          "ftplib", "smtplib", "poplib", "imaplib", "telnetlib", "ssl", "xmlrpc",
                          "websocket", "websockets", "socketserver", "asyncio.open_connection",
                          "asyncio.start_server"),
    "sanitizer.serialization": ("pickle", "_pickle", "cPickle", "marshal", "shelve", "dill",
                                "cloudpickle", "joblib", "copyreg"),
    "sanitizer.trace": ("sys.settrace", "sys.setprofile", "sys.gettrace", "sys.getprofile",
                        "sys.monitoring", "sys.addaudithook", "sys.call_tracing", "threading.settrace",
                        "threading.setprofile", "threading.settrace_all_threads",
                        "threading.setprofile_all_threads", "trace", "bdb", "pdb", "tracemalloc"),
    "sanitizer.import_hook": ("sys.meta_path", "sys.path_hooks", "sys.path_importer_cache", "sys.path",
                              "sys.dont_write_bytecode", "sys.pycache_prefix", "site", "__path__"),
    # Anything that tells the gate's run from production: the environment, the command line, the
    # interpreter, the working folder, the process and the host.
    "sanitizer.test_env": ("sys.modules", "sys.argv", "sys.orig_argv", "sys.flags", "os.environ",
                           "os.environb", "os.getenv", "os.getenvb", "os.putenv", "os.unsetenv",
                           "os.getcwd", "os.getcwdb", "os.getpid", "os.getppid", "os.uname",
                           "os.getlogin", "sys.executable", "sys.prefix", "sys.base_prefix",
                           "sys.exec_prefix", "getpass", "platform.node", "platform.uname", "psutil",
                           "__main__", "pathlib.Path.cwd", "pathlib.Path.home"),
    "sanitizer.builtins": ("builtins", "__builtins__", "__builtin__"),
    "sanitizer.exec": ("exec", "eval", "compile", "code", "codeop", "types.FunctionType",
                       "types.CodeType", "breakpoint"),
    "sanitizer.namespace": ("globals", "vars"),
    "sanitizer.reflection": ("operator.attrgetter", "operator.methodcaller", "__spec__", "__loader__"),
    "sanitizer.file_write": ("shutil", "tempfile", "os.remove", "os.unlink", "os.rename",
                             "os.renames", "os.replace", "os.mkdir", "os.makedirs", "os.rmdir",
                             "os.removedirs", "os.chmod", "os.chown", "os.lchown", "os.link",
                             "os.symlink", "os.truncate", "os.utime", "os.write", "os.open",
                             "os.ftruncate", "os.mkfifo", "os.mknod", "numpy.save", "numpy.savez",
                             "numpy.savetxt", "fileinput", "io.FileIO", "os.fdopen", "os.chdir",
                             "os.fchdir"),
    "sanitizer.file_read": ("glob", "os.listdir", "os.scandir", "os.walk", "os.fwalk", "__file__",
                            "numpy.load", "numpy.loadtxt", "numpy.fromfile", "pandas.read_csv",
                            "pandas.read_parquet", "pandas.read_json", "pandas.read_pickle",
                            "pandas.read_excel", "pandas.read_table"),
}
RULE_OF_NAME = {prefix: rule for rule, prefixes in BANNED.items() for prefix in prefixes}
# Attribute names that are findings on any object (their base is rarely resolvable statically).
ATTRIBUTE_RULES: dict[str, str] = {
    **dict.fromkeys(("f_back", "f_locals", "f_globals", "f_code", "f_builtins", "f_trace",
                     "tb_frame", "tb_next", "gi_frame", "cr_frame", "ag_frame", "f_lineno",
                     "__traceback__"),
                    "sanitizer.frame"),
    **dict.fromkeys(("settrace", "setprofile", "settrace_all_threads"), "sanitizer.trace"),
    **dict.fromkeys(("__setattr__", "__delattr__", "__getattribute__", "__dict__", "__globals__",
                     "__subclasses__", "__closure__", "__code__", "__loader__", "__spec__",
                     "__mro__", "__bases__", "__import__"), "sanitizer.reflection"),
    "__builtins__": "sanitizer.builtins",
    "__path__": "sanitizer.import_hook",
    "read_pickle": "sanitizer.serialization",
}
READ_METHODS = frozenset({"read_text", "read_bytes", "glob", "rglob", "iterdir"})
OPENERS = ("open", "io.open", "codecs.open")
# Unimported names that are checked like modules: the builtins the rules care about.
BUILTIN_NAMES = frozenset({"exec", "eval", "compile", "__import__", "globals", "vars", "exit", "quit",
                           "breakpoint", "__file__", "__builtins__", "__builtin__", "SystemExit",
                           "KeyboardInterrupt", "__path__", "__spec__", "__loader__"})
# Dunders whose constant answer makes any object pass a check: value -> the answer that cheats.
ANSWERS_EVERYTHING = {"__eq__": True, "__ne__": False, "__instancecheck__": True,
                      "__subclasscheck__": True, "__contains__": True}
TEST_MODULE = re.compile(r"^(tests?|testing|conftest|test_\w*|\w*_tests?)$")
# Strings naming the test machinery ("coverage" alone is an ordinary word in finance; "coverage.x" is not).
TEST_STRING = re.compile(r"^(_?pytest|unittest|doctest|pytest_cov|pluggy)(\.|$)|^coverage\."
                         r"|PYTEST|^COV_|COV_CORE|COVERAGE_|__builtins__|__import__")
SOURCE_MESSAGES: dict[str, str] = {
    "sanitizer.test_framework": "source code may not use the test framework or coverage",
    "sanitizer.imports_tests": "source code may not import test modules",
    "sanitizer.dynamic_import": "dynamic imports hide what the code loads",
    "sanitizer.ctypes": "native calls can patch the interpreter",
    "sanitizer.frame": "frame and stack inspection can read the caller (the test)",
    "sanitizer.exit": "exits, signals and exit hooks can end the run before results are written",
    "sanitizer.subprocess": "source code may not start processes or threads",
    "sanitizer.network": "source code may not use the network",
    "sanitizer.serialization": "pickle-like loaders run arbitrary code",
    "sanitizer.trace": "tracing and profiling hooks interfere with coverage",
    "sanitizer.import_hook": "import machinery changes can rewrite other modules",
    "sanitizer.test_env": "the code inspects the environment it runs in (tests, gate, host)",
    "sanitizer.builtins": "builtins may not be touched",
    "sanitizer.exec": "exec/eval/compile run code the gate cannot see",
    "sanitizer.namespace": "writing module namespaces by reflection is not allowed",
    "sanitizer.file_write": "source code may not write, move or delete files",
    "sanitizer.file_read": "source code may not read files or probe its own location",
    "sanitizer.reflection": "computed-name reflection hides what is accessed",
    "sanitizer.module_attr_write": "assigning attributes of imported modules patches them globally",
    "sanitizer.always_equal": "an object that equals anything defeats every assertion",
    "sanitizer.import_time_call": "calling own functions at import time fakes coverage",
    "sanitizer.answer_table": "hard-coded outputs for specific inputs special-case the tests",
    "sanitizer.pragma": "new coverage exclusion comments are not allowed",
}

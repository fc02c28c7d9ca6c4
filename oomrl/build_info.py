"""The one version every flow run carries: the package version plus the git commit it runs from.

`0.1.0+3f9c2a1b7d4e` — the same string in every flow. So a run in the Prefect UI says exactly which
code produced it. A strategy version is a different thing, shown as the run's `strategy-version:`
tag. Without a git checkout (e.g. a docker image) the setting runtime.git_sha (GIT_SHA) stands in.
"""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path

from oomrl import __version__
from oomrl.settings import get_settings

SHA_LENGTH = 12


@lru_cache(maxsize=1)
def git_sha(root: Path | None = None) -> str:
    """The checkout's commit (12 hex digits), else GIT_SHA, else "unknown"."""
    where = root or Path(__file__).resolve().parent.parent
    try:
        done = subprocess.run(
            ["git", "rev-parse", f"--short={SHA_LENGTH}", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        sha = done.stdout.strip() if done.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        sha = ""
    sha = sha or (get_settings().runtime.git_sha or "").strip()[:SHA_LENGTH]
    return sha if re.fullmatch(r"[0-9a-f]{4,40}", sha) else "unknown"


def flow_version() -> str:
    """`<package version>+<git sha>` (a PEP 440 local version)."""
    return f"{__version__}+{git_sha()}"

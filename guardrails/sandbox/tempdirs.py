"""Private temp folders that name their maker, so what a killed process left can be cleared.

The note (`owner`: "<pid> <unix time>") is what `oomrl.scratch.clear_orphans` reads. The next
repair removes a folder whose owner runs no more. The note sits at the folder's top, outside every
path a jail is given.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

OWNER_NOTE = "owner"


def owned_temp_dir(prefix: str) -> Path:
    """A fresh private folder under the system temp folder with this process's note in it."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    (root / OWNER_NOTE).write_text(f"{os.getpid()} {time.time():.3f}", encoding="utf-8")
    return root

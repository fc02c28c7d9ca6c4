"""A stack of a test module's own (`oomrl server up` on a fresh home, as a new user starts one) and
the docs' webhook example sent as a person would send it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from orchestration.stack import StackConfig, free_port, read_state
from tests.e2e.conftest import REPO, Stack


def fresh_env(home: Path) -> dict[str, str]:
    """This machine's environment with no OOMRL_ or PREFECT_ setting of the suite's, as a new shell
    has it.

    Two settings are the test's own, neither a parameter of any run: the scheduler is off so that no
    scheduled run (16:30 Shanghai) joins the quick runs counted here, and the worker polls each
    second."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OOMRL_", "PREFECT_", "OPENAI_"))
    }
    return {
        **env,
        "OOMRL_HOME": str(home),
        "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
        "PREFECT_LOGGING_LEVEL": "INFO",
    }


def oomrl(
    env: dict[str, str], *args: str, timeout_s: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestration", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


@contextmanager
def own_stack(home: Path, env: dict[str, str]) -> Iterator[Stack]:
    """`oomrl server up` on `home` with `env`; `oomrl server down` afterwards, whatever happened."""
    port, webhook_port = free_port(), free_port()
    try:
        started = oomrl(
            env, "server", "up", "--port", str(port), "--webhook-port", str(webhook_port)
        )
        assert started.returncode == 0, started.stdout + started.stderr
        state = read_state(home)
        assert state is not None
        config = StackConfig(home=home, port=port, webhook_port=webhook_port, project_dir=REPO)
        stack = Stack(
            config, (home / "webhook.secret").read_text().strip(), dict(state["pids"]), env
        )  # type: ignore[call-overload]
        with stack.api:
            yield stack
    finally:
        oomrl(env, "server", "down", timeout_s=120)


def send_docs_example(stack: Stack, url: str) -> dict[str, Any]:
    """docs/operations.md's signed `curl` of the loss alert `ops-1`, verbatim in bash; the webhook's
    answer."""
    text = (REPO / "docs" / "operations.md").read_text()
    (example,) = re.findall(r"```bash\n(body='\{\"alert_id\":\"ops-1\".*?)```", text, re.DOTALL)
    env = {
        "PATH": os.environ["PATH"],
        "OOMRL_WEBHOOK_SECRET": stack.secret,
        "OOMRL_WEBHOOK_URL": url,
    }
    answer: dict[str, Any] = {}
    for attempt in range(8):  # a polite sender runs it again on a 503 (Prefect busy)
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", example],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        if "flow_run_id" in answer or "could not start" not in str(answer.get("detail")):
            break
        time.sleep(min(2**attempt, 15))
    return answer

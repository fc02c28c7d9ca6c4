"""The worker container's command, run as the image would run it — its non-root uid, the environment
of infra/Dockerfile and infra/compose.yaml — takes a repair from the real Prefect server and
promotes it through the gate's bubblewrap sandbox.

There is no Docker engine here and nothing is built or downloaded: the image's code is this
checkout, its interpreter Debian's python3.11 with this checkout's installed packages (the paths the
image would hold are mapped onto them). What a Docker engine adds — seccomp, AppArmor, masked /proc
— is not exercised; compose's `security_opt` for the worker is what lifts those
(docs/operations.md)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestration.stack import free_port, stop_process
from tests.e2e.conftest import AUTOPSY, REPO, Stack

pytestmark = pytest.mark.e2e
INFRA = REPO / "infra"
IMAGE_HOME = "/var/lib/oomrl"


def image_env() -> dict[str, str]:
    """The ENV instructions of the Dockerfile (with ARG defaults substituted)."""
    text = (INFRA / "Dockerfile").read_text().replace("\\\n", " ")
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.MULTILINE))
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.+)$", text, re.MULTILINE):
        for key, value in re.findall(r"(\w+)=(\S+)", line):
            env[key] = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), value)
    return env


def image_uid() -> int:
    """The uid of the image's USER (useradd --uid)."""
    (uid,) = re.findall(r"useradd [^\n]*--uid (\d+)", (INFRA / "Dockerfile").read_text())
    return int(uid)


def compose_worker() -> tuple[list[str], dict[str, str]]:
    """The compose worker's command and environment (${VAR:-default} resolved to its default)."""
    worker = yaml.safe_load((INFRA / "compose.yaml").read_text())["services"]["worker"]
    env = {
        key: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value))
        for key, value in worker["environment"].items()
    }
    return list(worker["command"]), env


def image_interpreter(root: Path) -> Path:
    """A Python 3.11 the image's user can run, with this checkout's installed packages: Debian's
    python3.11 as a virtualenv whose site-packages is the project's (the project virtualenv's own
    interpreter lives under /root, which no other user may enter); its `prefect` script."""
    system = shutil.which("python3.11", path="/usr/local/bin:/usr/bin")
    if system is None:
        pytest.skip("no system python3.11 for the image's user")
    subprocess.run([system, "-m", "venv", "--without-pip", str(root)], check=True)
    site = root / "lib" / "python3.11" / "site-packages"
    shutil.rmtree(site)
    site.symlink_to(Path(sysconfig.get_paths()["purelib"]))
    script = root / "bin" / "prefect"
    script.write_text(f"#!{root / 'bin' / 'python'}\nfrom prefect.cli import app\napp()\n")
    script.chmod(0o755)
    return root / "bin"


@pytest.fixture()
def container_home() -> Iterator[Path]:
    """The worker's volume (OOMRL_HOME), owned by the image's user like a fresh named volume."""
    home = Path(tempfile.mkdtemp(prefix="oomrl-container-"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.kills_worker
def test_the_worker_container_command_repairs_through_the_sandbox_as_its_user(
    stack: Stack, container_home: Path
) -> None:
    from oomrl.portfolio.ledger import Ledger

    if os.geteuid() != 0:
        pytest.skip("running a process as the image's uid needs root here")
    uid = image_uid()
    assert uid != 0, "the image must not run as root"
    command, compose_env = compose_worker()
    # Compose's PostgreSQL service is not here
    ledger_url = f"sqlite:///{container_home / 'ledger.db'}"
    ledger = Ledger(ledger_url)
    ledger.create_schema()
    ledger.open_account("paper", 10_000_000)
    ledger.engine.dispose()
    (container_home / "home").mkdir()
    interpreter = image_interpreter(container_home / "python")
    for path in [container_home, *container_home.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)

    # The image's and compose's variables, the image's paths mapped onto this machine.
    env = {
        key: value.replace(IMAGE_HOME, str(container_home))
        for key, value in (image_env() | compose_env).items()
    }
    env.update(
        {
            # Service names of the compose network, mapped onto this machine.
            "PREFECT_API_URL": compose_env["PREFECT_API_URL"].replace(
                "http://prefect-server:4200/api", stack.config.api_url
            ),
            "OOMRL_LEDGER_URL": ledger_url,
            # What the image's base provides: its interpreter on PATH, the user's home.
            "PATH": f"{interpreter}:/usr/bin:/bin",
            "HOME": str(container_home / "home"),
            # The health endpoint (--with-healthcheck) on a free port: the container's 8080 is
            # private.
            "PREFECT_WORKER_WEBSERVER_PORT": str(free_port()),
            "PREFECT_WORKER_QUERY_SECONDS": "1",
            "PREFECT_WORKER_PREFETCH_SECONDS": "1",
        }
    )
    assert env["OOMRL_HOME"] == str(container_home) and compose_env["OOMRL_HOME"] == IMAGE_HOME
    assert "OOMRL_GATE_LOCK" not in env  # the gate uses its default sandbox

    stack.kill_worker()  # the container's worker is the only one polling the pool meanwhile
    log = (container_home / "worker.log").open("wb")
    worker = subprocess.Popen(
        command,
        env=env,
        cwd=REPO,
        user=uid,
        group=uid,
        extra_groups=[],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        autopsy = json.loads(AUTOPSY.read_text()) | {
            "alert_id": f"e2e-container-{secrets.token_hex(4)}"
        }
        # probation 0: the promotion itself is what runs as the image's user here (the image's env
        # sets none)
        run_id = stack.run_deployment(
            "repair/repair", {"autopsy": autopsy, "auto_approve": True, "probation": 0}
        )
        run = stack.wait_for(run_id, timeout_s=600)
    finally:
        stop_process(worker.pid)
        log.close()
        stack.restart_worker()
    tail = (container_home / "worker.log").read_text(errors="replace")[-3000:]
    assert (run["state_type"], run["state_name"]) == ("COMPLETED", "Promoted"), (
        f"{run['state_name']}: {run['state']['message']}\n{tail}"
    )
    (outcome_file,) = (container_home / "runs").glob("repair-*/outcome.json")
    assert outcome_file.stat().st_uid == uid  # written by the image's user, not by root
    outcome = json.loads(outcome_file.read_text())
    assert outcome["status"] == "promoted"
    backends = {attempt["verdict"]["locks"]["backend"] for attempt in outcome["attempts"]}
    assert backends == {"bwrap"}, backends  # every gate run was sandboxed, as uid 10001

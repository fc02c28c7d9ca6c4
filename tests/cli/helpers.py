"""Helpers of the CLI tests: run the real typer app, check a refusal, hash a folder."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from orchestration.cli import app


def snapshot(root: Path) -> dict[str, str]:
    """Every file (by content hash) and folder under root."""
    return {
        str(p.relative_to(root)): "dir"
        if p.is_dir()
        else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


def refused(result: Any, code: int, *fragments: str) -> str:
    """The checks every refusal must pass (exit code, message, no traceback, one line); the
    output."""
    output = result.output
    assert result.exit_code == code, output
    assert isinstance(result.exception, SystemExit), f"uncaught {result.exception!r}"
    assert "Traceback" not in output
    for fragment in fragments:
        assert fragment in output
    if code == 1:
        assert output.startswith("error: ") and output.count("\n") == 1, output
    return output


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    """`oomrl ARGS` in this process."""
    return CliRunner().invoke(app, list(args), env=env)


def write_json(path: Path, payload: Any) -> Path:
    path.write_text(json.dumps(payload))
    return path


def closed_port() -> int:
    """A loopback port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

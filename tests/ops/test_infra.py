"""infra/: the Kubernetes pool template renders with its defaults; compose and the Dockerfile hang
together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

INFRA = Path(__file__).resolve().parents[2] / "infra"


def _template() -> dict[str, Any]:
    return json.loads((INFRA / "k8s-work-pool-template.json").read_text())


def test_k8s_template_passes_prefect_server_validation() -> None:
    from prefect.server.schemas.actions import validate_base_job_template

    template = _template()
    assert validate_base_job_template(template) == template


def test_k8s_template_placeholders_are_declared_and_render() -> None:
    from prefect.utilities.templating import apply_values, find_placeholders

    template = _template()
    declared = set(template["variables"]["properties"])
    used = {p.name for p in find_placeholders(template["job_configuration"])}
    assert used <= declared, sorted(used - declared)
    defaults = {
        name: spec["default"]
        for name, spec in template["variables"]["properties"].items()
        if "default" in spec
    }
    values = {**defaults, "command": "prefect flow-run execute", "name": "run-1", "labels": {}}
    rendered = apply_values(template["job_configuration"], values)
    container = rendered["job_manifest"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "oomrl:latest" and container["workingDir"] == "/opt/oomrl"
    assert container["env"]["OOMRL_HOME"] == "/var/lib/oomrl"
    assert rendered["namespace"] == "oomrl"


def test_compose_wires_postgres_server_worker_and_webhook() -> None:
    compose = yaml.safe_load((INFRA / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "prefect-server", "worker", "webhook"} <= set(services)
    server_db = services["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert server_db.startswith("postgresql+asyncpg://") and "@postgres:5432/" in server_db
    for name in ("worker", "webhook", "deploy"):
        assert services[name]["environment"]["PREFECT_API_URL"] == "http://prefect-server:4200/api"
        assert services[name]["build"]["dockerfile"] == "infra/Dockerfile"
    assert "oomrl-local" in services["worker"]["command"]
    # What bubblewrap needs inside a container (tests/e2e/test_container_worker.py runs the rest).
    assert set(services["worker"]["security_opt"]) == {
        "seccomp=unconfined",
        "apparmor=unconfined",
        "systempaths=unconfined",
    }
    # The secret comes from the operator's environment; compose refuses to start without it.
    assert services["webhook"]["environment"]["OOMRL_WEBHOOK_SECRET"].startswith(
        "${OOMRL_WEBHOOK_SECRET:?"
    )
    assert (INFRA / services["postgres"]["volumes"][1].split(":")[0]).exists()


def test_dockerfile_builds_the_worker_image() -> None:
    text = (INFRA / "Dockerfile").read_text()
    assert text.startswith("# oomrl worker image")
    assert '"--pool", "oomrl-local"' in text and "constraints.txt" in text
    # The gate's sandbox, for the non-root user
    assert "bubblewrap" in text and "USER oomrl" in text
    assert "USER oomrl" in text and "ARG GIT_SHA" in text
    ignored = (INFRA / "Dockerfile.dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored

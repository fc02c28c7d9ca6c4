"""The runtime group: how this process runs (the broker kernel, report links, the Prefect API, the
build)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from oomrl.settings.sources import Group, own_variable


class RuntimeSettings(Group):
    """Process knobs, most under names of their own (OOMRL_BROKER_KERNEL, PREFECT_API_URL,
    GIT_SHA)."""

    unsafe_no_jail: bool = Field(
        False, description="Run strategy code unjailed where no jail can be made; replays say so."
    )
    broker_kernel: bool = Field(
        True, description=("Compile the broker's fill loop with numba; `0` runs the numpy broker.")
    )
    reports_url: str | None = Field(
        None, description=("Base URL where browsers fetch the report files artifacts link (URL).")
    )
    prefect_api_url: str | None = Field(
        None,
        json_schema_extra=own_variable("PREFECT_API_URL"),
        description="The Prefect server the webhook uses (URL).",
    )
    prefect_api_key: str | None = Field(
        None,
        json_schema_extra=own_variable("PREFECT_API_KEY"),
        description="Key of the Prefect API (secret).",
    )
    git_sha: str | None = Field(
        None,
        json_schema_extra=own_variable("GIT_SHA"),
        description="The build's commit where no git checkout is at hand, e.g. an image (hex).",
    )
    # Read as text: tasks/runners.py checks them and names the variable when one is wrong.
    dask_address: str | None = Field(
        None,
        description=(
            "An existing Dask scheduler parallel flows send tasks to, e.g. "
            "tcp://scheduler:8786 (URL)."
        ),
    )
    dask_workers: str | None = Field(
        None,
        description=(
            "Workers of a temporary Dask LocalCluster per flow run; unset: no Dask (workers)."
        ),
    )
    dask_processes: str | None = Field(
        None,
        description=("`0` keeps LocalCluster workers as threads in-process; unset: processes."),
    )
    threads: str | None = Field(
        None,
        description=(
            "Width of the default thread pool of parallel flows; unset: Prefect's default "
            "(threads)."
        ),
    )

    def dask_env(self) -> dict[str, str]:
        """The task runner's variables by name, the unset ones left out (tasks/runners.py reads
        them)."""
        named = {
            "OOMRL_DASK_ADDRESS": self.dask_address,
            "OOMRL_DASK_WORKERS": self.dask_workers,
            "OOMRL_DASK_PROCESSES": self.dask_processes,
            "OOMRL_THREADS": self.threads,
        }
        return {name: value for name, value in named.items() if value is not None}

    @field_validator("broker_kernel", mode="before")
    @classmethod
    def _only_zero_is_off(cls, value: Any) -> Any:
        """As before the settings tree: the string `0` turns the kernel off, any other on."""
        return value != "0" if isinstance(value, str) else value

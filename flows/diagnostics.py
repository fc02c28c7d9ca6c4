"""The loss-diagnostics flow: alert rules → autopsies → repair policy → `oomrl.loss.alert` events →
the ledger."""

from __future__ import annotations

from datetime import date

from prefect import flow

from oomrl.build_info import flow_version
from oomrl.diagnostics.repair_policy import JudgedAutopsy
from oomrl.settings import settings_for
from tasks.attribution import diagnose_and_alert, publish_diagnosis
from tasks.chain import last_stored_session
from tasks.expected_ends import configure_flow_logging

FLOW_VERSION = flow_version()  # package version + git SHA, the same in every flow
configure_flow_logging()  # expected ends in one line; oomrl records in the run logs


# retries=0: a failed diagnosis is a final answer (bad input).
# The tasks retry what is transient.
@flow(name="loss-diagnostics", version=FLOW_VERSION, retries=0, log_prints=True)
def loss_diagnostics(
    account: str | None = None,
    as_of: date | None = None,
    start: date | None = None,
    config_file: str | None = None,
    home: str | None = None,
) -> list[JudgedAutopsy]:
    """Diagnose an account's NAV.

    Each new alert is emitted as `oomrl.loss.alert` with the repair verdict. A subflow of the
    daily chain (no deployment of its own): it returns the models, read by attribute.

    Args:
        account: The paper account to diagnose (empty: OOMRL_ACCOUNT, `paper` by default).
        as_of: The last session to diagnose, a date YYYY-MM-DD. Empty: the last session in the
            market store. The last NAV row on or before it is used.
        start: The first session to diagnose, a date YYYY-MM-DD (empty: `as_of` only).
        config_file: Optional alert thresholds (TOML, YAML or JSON) on the worker; empty: the
            defaults.
        home: Internal: OOMRL_HOME on the worker (folder). Leave empty to use the worker's setting.
    """
    name = account or settings_for(home).ledger.account
    day = (as_of or last_stored_session(home)).isoformat()
    judged = diagnose_and_alert(name, day, config_file, home, start.isoformat() if start else None)
    publish_diagnosis(name, day, judged)
    for j in judged:
        a = j.autopsy
        print(
            f"{a.as_of} {a.severity} {a.trigger.rule}: {a.diagnostics.root_cause} "
            f"(repair: {j.decision.verdict})"
        )
    return judged

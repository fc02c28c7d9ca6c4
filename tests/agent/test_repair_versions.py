"""A repair starts from its account's version: another account's promotion meanwhile changes neither
the candidate's base nor, when the repair is promoted, that account's version; the real gate
throughout."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from oomrl.agent.providers import OfflineProvider
from oomrl.agent.roles import Mandate
from oomrl.errors import UnknownActiveVersionError
from oomrl.repair import promotion
from oomrl.repair.crossval import CrossValidation
from oomrl.repair.loop import RepairContext, run_repair
from tests.agent.repair_helpers import (
    AUTOPSY,
    SOURCE,
    ScriptedProvider,
    approve,
    edges,
    make_context,
    replays,
)

MARKER = "# other account's repair: 7f3a"


@pytest.mark.slow  # two accounts, two promotions, a repair: ~9 s
def test_a_repair_is_based_on_its_accounts_version_not_on_another_accounts_promotion(
    tmp_path: Path,
) -> None:
    ctx = make_context(tmp_path, OfflineProvider())  # account paper trades v1
    versions = ctx.versions
    v1 = versions.resolve("v1")
    # Account "other" promotes v2 first: the branch tip is now a version paper does not trade.
    other = versions.clone_to(tmp_path / "other", at=v1)
    source = other / SOURCE
    source.write_text(MARKER + "\n" + source.read_text())
    v2 = promotion.promote(versions, other, "Other's repair", {}, "other", "daily_momentum")
    assert versions.head() == v2.sha and versions.base_for("paper") == v1

    passing = replays()
    bases: list[tuple[str | None, list[str]]] = []

    def validate(c: RepairContext, mandate: Mandate) -> CrossValidation:
        bases.append((c.state.base, c.versions.git("rev-list", "HEAD", cwd=c.candidate).split()))
        return passing(c, mandate)

    ctx = replace(ctx, cross_validator=validate)
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert outcome.status == "promoted", outcome.reason
    assert outcome.version is not None and outcome.version.tag == "v3"
    # The candidate was cloned at v1 (v2 is not in its history) and replayed against v1.
    assert bases and all(
        base == v1 and v1 in history and v2.sha not in history for base, history in bases
    )
    # v3 is paper's tests commit and patch on top of v1; v2 is not among its ancestors.
    assert versions.git("rev-parse", "v3~2") == v1 and not versions.is_ancestor(
        v2.sha, outcome.version.sha
    )
    assert MARKER not in versions.git("show", f"v3:{SOURCE}")
    assert versions.head() == v2.sha  # the branch moved only on fast-forward: it did not
    assert versions.ledger.active_version("other") == v2.sha  # type: ignore[union-attr]
    assert versions.ledger.active_version("paper") == outcome.version.sha  # type: ignore[union-attr]
    assert versions.git("status", "--porcelain") == ""


def test_a_repair_of_an_account_whose_version_the_workspace_lacks_fails_by_name(
    tmp_path: Path,
) -> None:
    ctx = make_context(tmp_path, OfflineProvider())
    ctx.versions.ledger.set_active_version("paper", "f" * 40, "daily_momentum")  # type: ignore[union-attr]
    head = ctx.versions.head()
    outcome = run_repair(AUTOPSY, ctx, approve)
    assert (outcome.status, outcome.step) == ("failed", "critic")
    assert outcome.reason.startswith(
        f"{UnknownActiveVersionError.__name__}: account 'paper' trades "
        "version ffffffffffff, which the strategy workspace"
    )
    assert edges(outcome) == [("critic", "failed")] and not outcome.inputs  # no role was asked
    assert ctx.versions.head() == head and [v.tag for v in ctx.versions.list()] == ["v1"]
    assert not ctx.candidate.exists()


def _promote_for_paper_meanwhile(ctx: RepairContext, tmp_path: Path) -> None:
    """What another repair of the same account does while this one waits for the claim."""
    other = ctx.versions.clone_to(tmp_path / "meanwhile", at="v1")
    (other / SOURCE).write_text(MARKER + "\n" + (other / SOURCE).read_text())
    promotion.promote(ctx.versions, other, "The other repair", {}, "paper", "daily_momentum")


def test_a_repair_whose_account_was_repaired_while_it_waited_stops_by_name(tmp_path: Path) -> None:
    ctx = make_context(tmp_path, ScriptedProvider())
    outcome = run_repair(
        AUTOPSY, ctx, approve, hold=lambda: _promote_for_paper_meanwhile(ctx, tmp_path)
    )
    assert (outcome.status, outcome.step) == ("failed", "superseded")
    assert (
        outcome.reason.startswith("account paper now trades v2 (")
        and "promoted while this repair waited" in outcome.reason
        and "started from v1 (" in outcome.reason
    )
    assert edges(outcome) == [("critic", "approval"), ("approval", "failed")]
    assert [v.tag for v in ctx.versions.list()] == ["v1", "v2"]  # only the other repair's version
    assert ctx.versions.ledger.active_version("paper") == ctx.versions.resolve("v2")  # type: ignore[union-attr]
    assert not ctx.candidate.exists()


def test_a_repair_that_cannot_take_its_account_fails_at_the_claim(tmp_path: Path) -> None:
    from oomrl.repair.loop import claim_for

    ctx = make_context(tmp_path, ScriptedProvider())
    ctx = replace(ctx, claim_wait_s=0.0)  # `oomrl repair --wait 0`
    with claim_for(ctx, "holder") as holder:  # another repair of paper holds it through the gate
        holder.hold()
        # Its own claim, as the CLI and the demo take it
        outcome = run_repair(AUTOPSY, ctx, approve)
    assert (outcome.status, outcome.step) == ("failed", "claim")
    assert outcome.reason.startswith(
        f"account paper is being repaired by run holder-{ctx.run_dir.name} (pid "
    )
    assert edges(outcome) == [("critic", "approval"), ("approval", "failed")]
    assert [v.tag for v in ctx.versions.list()] == ["v1"]

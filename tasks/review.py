"""The mandate review form a paused repair shows in the Prefect UI: every field titled and described
with its unit, prefilled with the proposal, its bounds kept."""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

import pydantic
from prefect.input import RunInput
from pydantic import Field

from oomrl import repair as domain
from oomrl.agent.roles import TEST_NODE_ID, Mandate
from oomrl.diagnostics.autopsy import Autopsy, LossAlert
from oomrl.diagnostics.mandate import Constraints


class MandateReview(RunInput):
    """The reviewer's answer in the Prefect UI: approve, edit (change the fields) or reject."""

    decision: Literal["approve", "edit", "reject"] = Field(
        "approve",
        title="Decision",
        description="approve the proposed mandate, edit it (change the fields below), or reject it",
    )
    text: str = Field(
        "",
        title="Mandate (text)",
        description="The mandate in words, what the repair must achieve (edit only; empty keeps "
        "the proposal's)",
    )
    rebalance: Literal["daily", "weekly", "biweekly", "monthly"] | None = Field(
        None,
        title="Rebalance (how often)",
        description="How often the strategy may trade: at most one rebalance a day, week, two "
        "weeks or "
        "month (edit only)",
    )
    # The bounds are the mandate's (oomrl.diagnostics.mandate.Constraints): the form refuses what
    # a repair would.
    max_adv_participation: float | None = Field(
        None,
        gt=0,
        le=1,
        title="Max ADV participation (fraction of ADV)",
        description="Largest order as a fraction of the stock's average daily volume, above 0 "
        "and at "
        "most 1 "
        "(0.05 = 5 %; edit only)",
    )
    max_weekly_turnover: float | None = Field(
        None,
        gt=0,
        le=2,
        title="Max weekly turnover (fraction of NAV)",
        description="Largest turnover in one week, Σ|Δw| as a fraction of NAV, above 0 and at "
        "most 2 "
        "(0.3 = 30 %; edit only)",
    )
    supersedes: list[Annotated[str, Field(pattern=TEST_NODE_ID)]] = Field(
        default_factory=list,
        title="Superseded old tests (node ids)",
        description="Old tests the mandate makes obsolete, one node id each "
        "(tests/strategies/test_x.py::test_name): only these may be rewritten by the "
        "repair's tests (judged as red tests); every other old test may only be added "
        "to (edit only)",
    )
    reason: str = Field(
        "",
        title="Reason (text)",
        description="Why: kept in the run's outcome and the version's notes",
    )

    @classmethod
    def prefilled(cls, description: str, **values: Any) -> type[MandateReview]:
        """A form whose fields default to `values`, keeping each field's title, description and
        bounds.

        Prefect's `with_initial_data` rebuilds each prefilled field from its type alone, which drops
        the description the UI shows and the bounds the form enforces."""
        fields: dict[str, Any] = {}
        for key, value in values.items():
            original = cls.model_fields[key]
            info = copy.copy(original)
            info.default, info.default_factory = value, None
            fields[key] = (original.annotation, info)
        model = pydantic.create_model(cls.__name__, __base__=cls, **fields)
        model._description = description
        return model

    def to_decision(self, proposed: Mandate) -> domain.Decision:
        """The domain decision; an edit keeps the proposal's module and alert id."""
        if self.decision != "edit":
            return domain.Decision(action=self.decision, reason=self.reason)
        constraints = {
            **proposed.constraints.model_dump(),
            "rebalance": self.rebalance,
            "max_adv_participation": self.max_adv_participation,
            "max_weekly_turnover": self.max_weekly_turnover,
        }
        edited = proposed.model_copy(
            update={
                "text": self.text or proposed.text,
                "constraints": Constraints.model_validate(constraints),
                "supersedes": list(dict.fromkeys(self.supersedes)),
                "rationale": f"{proposed.rationale} | edited by a reviewer: {self.reason}",
            }
        )
        return domain.Decision(action="edit", mandate=edited, reason=self.reason)


def review_form(
    mandate: Mandate, autopsy: Autopsy | LossAlert | None, timeout_s: int
) -> type[MandateReview]:
    """The form for this mandate: its text rounded with units, the fields prefilled with the
    proposal."""
    from oomrl.repair_artifacts import mandate_markdown

    c = mandate.constraints
    return MandateReview.prefilled(
        mandate_markdown(mandate, autopsy, timeout_s),
        text=mandate.text,
        rebalance=c.rebalance,
        max_adv_participation=c.max_adv_participation,
        max_weekly_turnover=c.max_weekly_turnover,
        supersedes=list(mandate.supersedes),
    )

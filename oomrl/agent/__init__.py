"""The repair agent: LLM client and budget, providers (openai, offline rules, replay), roles and
their prompts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from oomrl.agent.budget import Budget, Usage
    from oomrl.agent.capital import LLMBudgetBook, to_nano
    from oomrl.agent.feedback import (
        MAX_VIOLATIONS,
        encode_cross_validation,
        encode_verdict,
        locate,
        missed_checks,
        role_evidence,
    )
    from oomrl.agent.llm import LLMClient, OpenAIBackend, Transcript, parse_json_answer
    from oomrl.agent.machine import RUN_ENDS, TRANSITIONS, Trail
    from oomrl.agent.offline_author import mandate_tests, missed_tests, pinned_tests, supersede
    from oomrl.agent.offline_coder import reference_change
    from oomrl.agent.offline_common import template, unified_diff
    from oomrl.agent.providers import (
        PROVIDERS,
        OfflineProvider,
        ReplayBackend,
        alert_type,
        get_provider,
    )
    from oomrl.agent.records import budget_rows, trail_markdown, transcript_rows
    from oomrl.agent.roles import (
        TEST_NODE_ID,
        CoderView,
        CriticView,
        LLMProvider,
        Mandate,
        Patch,
        TestAuthorView,
        prompt_text,
        read_tree,
    )
    from oomrl.agent.verdicts import PreGateVerdict, RepeatVerdict

__all__ = [
    "MAX_VIOLATIONS",
    "PROVIDERS",
    "RUN_ENDS",
    "TEST_NODE_ID",
    "TRANSITIONS",
    "Budget",
    "CoderView",
    "CriticView",
    "LLMBudgetBook",
    "LLMClient",
    "LLMProvider",
    "Mandate",
    "OfflineProvider",
    "OpenAIBackend",
    "Patch",
    "PreGateVerdict",
    "RepeatVerdict",
    "ReplayBackend",
    "TestAuthorView",
    "Trail",
    "Transcript",
    "Usage",
    "alert_type",
    "budget_rows",
    "encode_cross_validation",
    "encode_verdict",
    "get_provider",
    "locate",
    "mandate_tests",
    "missed_checks",
    "missed_tests",
    "parse_json_answer",
    "pinned_tests",
    "prompt_text",
    "read_tree",
    "reference_change",
    "role_evidence",
    "supersede",
    "template",
    "to_nano",
    "trail_markdown",
    "transcript_rows",
    "unified_diff",
]
if not TYPE_CHECKING:  # a name loads its module on first use: `oomrl --help` stays light
    __getattr__ = front_door(__name__, __file__)

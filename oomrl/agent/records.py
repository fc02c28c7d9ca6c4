"""A repair's records as table rows for artifacts: transcript, budget, the state machine's trail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oomrl.agent.llm import Transcript

PREVIEW_CHARS = 40  # the Prefect UI never wraps a table cell: the whole text is in transcript.jsonl


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS] + " …"


def _tokens(used: int | None, limit: int | None) -> str:
    shown = "—" if used is None else f"{used:,}"
    return f"{shown} of {limit:,}" if limit else shown


def transcript_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """One row per transcript record: who asked or answered, what it cost (of its limit), a
    preview."""
    rows = []
    for record in Transcript(Path(run_dir) / "transcript.jsonl").records():
        usage = record.get("usage") or {}
        if record["kind"] == "request":
            text = (
                (record.get("messages") or [{}])[-1].get("content", "")
                if record.get("messages")
                else str(record.get("view", ""))
            )
        else:
            text = str(record.get("content") or record.get("error") or "")
        used = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0) if usage else None
        rows.append(
            {
                "seq": record.get("seq"),
                "kind": record["kind"],
                "role": record.get("role"),
                "tokens": _tokens(used, record.get("max_tokens")),
                "preview": _preview(text),
            }
        )
    return rows


def budget_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """This repair's spend against its limits, and the account's balance in the ledger."""
    rows = [
        {
            "scope": "this repair",
            "calls": summary.get("calls"),
            "tokens": summary.get("tokens_spent"),
            "tokens_limit": summary.get("max_tokens"),
            "usd": summary.get("cost_spent_usd"),
            "usd_limit": summary.get("max_cost_usd"),
        }
    ]
    balance = summary.get("account_balance")
    if balance:
        rows.append(
            {
                "scope": f"account {balance['account']}",
                "calls": None,
                "tokens": balance["tokens_spent"],
                "tokens_limit": balance["tokens_limit"],
                "usd": round(balance["usd_spent"], 6),
                "usd_limit": balance["usd_limit"],
            }
        )
    return rows


def trail_markdown(trail: list[dict[str, str]]) -> str:
    """The transitions the repair took, in order, as a numbered list (a reason is a sentence)."""
    lines = ["# The repair's transitions", ""]
    lines += [
        f"{number}. **{m['source']} → {m['target']}** ({m['at']}): {m['reason']}"
        for number, m in enumerate(trail, start=1)
    ]
    return "\n".join(lines) + "\n"

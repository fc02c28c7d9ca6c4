"""A repair's records as table rows for artifacts: the transcript, the budget, the state machine's trail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oomrl.agent.llm import Transcript

PREVIEW_CHARS = 160


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS] + " …"


def transcript_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """One row per transcript record: who asked or answered, what it cost, and a preview."""
    rows = []
    for record in Transcript(Path(run_dir) / "transcript.jsonl").records():
        usage = record.get("usage") or {}
        if record["kind"] == "request":
            text = (record.get("messages") or [{}])[-1].get("content", "") if record.get("messages") \
                else str(record.get("view", ""))
        else:
            text = str(record.get("content") or record.get("error") or "")
        rows.append({"seq": record.get("seq"), "kind": record["kind"], "role": record.get("role"),
                     "max_tokens": record.get("max_tokens"),
                     "tokens": (usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
                     if usage else None,
                     "model": record.get("model"), "preview": _preview(text)})
    return rows


def budget_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """This repair's spend against its limits, and the account's balance in the ledger."""
    rows = [{"scope": "this repair", "calls": summary.get("calls"), "tokens": summary.get("tokens_spent"),
             "tokens_limit": summary.get("max_tokens"), "usd": summary.get("cost_spent_usd"),
             "usd_limit": summary.get("max_cost_usd")}]
    balance = summary.get("account_balance")
    if balance:
        rows.append({"scope": f"account {balance['account']}", "calls": None,
                     "tokens": balance["tokens_spent"], "tokens_limit": balance["tokens_limit"],
                     "usd": round(balance["usd_spent"], 6), "usd_limit": balance["usd_limit"]})
    return rows


def trail_rows(trail: list[dict[str, str]]) -> list[dict[str, str]]:
    """The transitions the repair took, in order."""
    return [{"from": m["source"], "to": m["target"], "why": m["reason"], "at": m["at"]} for m in trail]

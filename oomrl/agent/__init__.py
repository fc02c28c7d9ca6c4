"""The repair agent: LLM client and budget, providers (openai, offline rules, replay), roles and
their prompts."""

from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"

"""STDAW guardrails: the deterministic judge of agent patches (imports nothing it judges)."""

"""oomrl: Out-of-Money Reinforcement Learning — the market judges, a deterministic gate guards the
repair."""

__version__ = "0.1.0"

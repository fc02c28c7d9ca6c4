"""The agent's patch: strict parsing, the diff gate's scope checks, the apply inside a scratch root."""

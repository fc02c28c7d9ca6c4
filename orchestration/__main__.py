"""Allows `python -m orchestration`: the whole `oomrl` command."""

from orchestration.cli import main

main()

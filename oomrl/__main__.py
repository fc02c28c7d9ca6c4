"""Allows `python -m oomrl`."""

from oomrl.cli import main

main()

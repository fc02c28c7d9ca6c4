"""The host side of locked runs: jails, strategy hosts, test runs, anchors and coverage data."""

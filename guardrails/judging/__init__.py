"""The gate's judging checks on recorded runs: outcomes, red tests, behaviour, mutants, re-checks."""

"""Trading strategies the agent maintains (S): pure pandas/numpy/pydantic, no I/O, no oomrl imports."""

"""W1's strategy as a workspace's code (S): bench/bench_replay.py replays it in a strategy host."""

"""Performance, attribution and reports of a daily return series against the CSI 300."""

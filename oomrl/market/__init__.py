"""A-share market facts: the XSHG calendar, boards and price limits, trading rules, the CSI 300
universe."""

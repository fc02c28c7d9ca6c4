"""The portfolio: the ledger, the broker, rebalancing and replay, strategies reached through
hosts."""

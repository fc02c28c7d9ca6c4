"""The strategy API: what a strategy is given (MarketView) and the helpers it may build on.

Trusted code outside S: the agent cannot change it, the strategy host builds every view from its
own copy, and the view holds only rows up to the decision date (there is no later row to reach).
"""

from strategy_api.helpers import (
    WEIGHT_TOLERANCE,
    check_weights,
    equal_weights,
    iso_week,
    momentum,
    top_k,
)
from strategy_api.protocol import Strategy, StrategyParams
from strategy_api.view import FIELDS, History, Holdings, MarketView

__all__ = [
    "FIELDS",
    "WEIGHT_TOLERANCE",
    "History",
    "Holdings",
    "MarketView",
    "Strategy",
    "StrategyParams",
    "check_weights",
    "equal_weights",
    "iso_week",
    "momentum",
    "top_k",
]

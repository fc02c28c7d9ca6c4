"""A-share market facts: the XSHG calendar, boards and price limits, trading rules, the CSI 300
universe."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrails.lazy import front_door

if TYPE_CHECKING:
    from oomrl.market.boards import Board, board_of, risk_warning, symbol_or_text, to_symbol
    from oomrl.market.calendar import CALENDAR_NAME, last_completed_session, non_sessions, sessions
    from oomrl.market.limits import price_limit_pct
    from oomrl.market.lots import (
        BSE_LOT,
        ROUND_LOT,
        STAR_LOT,
        is_legal_buy,
        is_legal_sell,
        round_buy,
        round_sell,
    )
    from oomrl.market.markets import (
        GENERIC_DEFAULTS,
        MARKETS,
        GenericRules,
        get_market,
        market_name,
        market_of,
        normalize,
    )
    from oomrl.market.rules import (
        AShareRules,
        FillPrice,
        FrictionRules,
        Side,
        cents_array,
        finite,
        to_cents,
    )
    from oomrl.market.universe import members_between, members_on, membership_from_changes

__all__ = [
    "BSE_LOT",
    "CALENDAR_NAME",
    "GENERIC_DEFAULTS",
    "MARKETS",
    "ROUND_LOT",
    "STAR_LOT",
    "AShareRules",
    "Board",
    "FillPrice",
    "FrictionRules",
    "GenericRules",
    "Side",
    "board_of",
    "cents_array",
    "finite",
    "get_market",
    "is_legal_buy",
    "is_legal_sell",
    "last_completed_session",
    "market_name",
    "market_of",
    "members_between",
    "members_on",
    "membership_from_changes",
    "non_sessions",
    "normalize",
    "price_limit_pct",
    "risk_warning",
    "round_buy",
    "round_sell",
    "sessions",
    "symbol_or_text",
    "to_cents",
    "to_symbol",
]
if not TYPE_CHECKING:  # a name loads its module on first use: `oomrl --help` stays light
    __getattr__ = front_door(__name__, __file__)

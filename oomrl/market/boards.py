"""Boards and price-limit classes of A-share codes (main board, ChiNext, STAR, ST), from the code alone."""

from __future__ import annotations

import re
from enum import Enum

SYMBOL_PATTERN = re.compile(r"^(\d{6})\.(SH|SZ|BJ)$")


class Board(str, Enum):
    """Listing boards with distinct price-limit rules."""

    MAIN = "main"
    CHINEXT = "chinext"
    STAR = "star"
    BSE = "bse"


LIMIT_PCT: dict[Board, float] = {Board.MAIN: 0.10, Board.CHINEXT: 0.20, Board.STAR: 0.20, Board.BSE: 0.30}
ST_LIMIT_PCT = 0.05


def exchange_of(code: str) -> str:
    """Exchange suffix for a 6-digit code: SH for 6xxxxx (and 9xxxxx B), BJ for 4/8xxxxx and 920xxx, else SZ."""
    if not re.fullmatch(r"\d{6}", code):
        raise ValueError(f"not a 6-digit A-share code: {code!r}")
    if code[0] in "48" or code.startswith("920"):
        return "BJ"
    if code[0] in "69":
        return "SH"
    return "SZ"


def to_symbol(code: str) -> str:
    """Canonical symbol from a code in any common spelling: 600519, sh600519, 600519.SS, 600519.SH."""
    text = str(code).strip().upper()
    text = text.replace(".SS", ".SH")
    if len(text) == 8 and text[:2] in ("SH", "SZ", "BJ") and text[2:].isdigit():
        return f"{text[2:]}.{text[:2]}"
    if SYMBOL_PATTERN.match(text):
        return text
    if text.isdigit() and len(text) <= 6:
        text = text.zfill(6)
        return f"{text}.{exchange_of(text)}"
    raise ValueError(f"cannot read an A-share symbol from {code!r}")


def symbol_or_text(code: object) -> str:
    """The canonical symbol when `code` reads as one, else the text unchanged (validation then names it)."""
    try:
        return to_symbol(str(code))
    except ValueError:
        return str(code)


def board_of(symbol: str) -> Board:
    """The board a symbol is listed on: 300/301/302 ChiNext, 688/689 STAR, 4/8/920 BSE, else main."""
    code = to_symbol(symbol)[:6]
    if code.startswith(("300", "301", "302")):
        return Board.CHINEXT
    if code.startswith(("688", "689")):
        return Board.STAR
    if code[0] in "48" or code.startswith("920"):
        return Board.BSE
    return Board.MAIN


def price_limit_pct(symbol: str, is_st: bool = False) -> float:
    """Daily price-limit fraction: ±10 % main, ±20 % ChiNext/STAR, ±30 % BSE, ±5 % ST on the main board."""
    board = board_of(symbol)
    if is_st and board == Board.MAIN:
        return ST_LIMIT_PCT
    return LIMIT_PCT[board]


def limit_prices(prev_close: float, symbol: str, is_st: bool = False) -> tuple[float, float]:
    """(limit-down, limit-up) prices from the unadjusted previous close, rounded to the 0.01 CNY tick."""
    pct = price_limit_pct(symbol, is_st)
    # Exchanges round the limit price half-up to the tick; Decimal avoids binary rounding surprises.
    from decimal import ROUND_HALF_UP, Decimal

    base = Decimal(str(prev_close))
    up = (base * (1 + Decimal(str(pct)))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    down = (base * (1 - Decimal(str(pct)))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return float(down), float(up)

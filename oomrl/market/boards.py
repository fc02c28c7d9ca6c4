"""Boards of A-share codes (main board, ChiNext, STAR, BSE) from the code alone."""

from __future__ import annotations

import re
from enum import StrEnum

SYMBOL_PATTERN = re.compile(r"^(\d{6})\.(SH|SZ|BJ)$")
# Risk-warning names carry ST, *ST (or, before the 2006 share reform, S*ST / SST) as a prefix.
RISK_WARNING_NAME = re.compile(r"^\s*(\*|S\*|S)?ST(?![A-Za-z])")


class Board(StrEnum):
    """Listing boards with distinct price-limit rules."""

    MAIN = "main"
    CHINEXT = "chinext"
    STAR = "star"
    BSE = "bse"


def exchange_of(code: str) -> str:
    """Exchange suffix for a 6-digit code.

    SH for 6xxxxx (and 9xxxxx B), BJ for 4/8xxxxx and 920xxx, else SZ."""
    if not re.fullmatch(r"\d{6}", code):
        raise ValueError(f"not a 6-digit A-share code: {code!r}")
    if code[0] in "48" or code.startswith("920"):
        return "BJ"
    if code[0] in "69":
        return "SH"
    return "SZ"


def to_symbol(code: str) -> str:
    """Canonical symbol from a code in any common spelling: 600519, sh600519, 600519.SS,
    600519.SH."""
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
    """The canonical symbol when `code` reads as one, else the text unchanged.

    Validation then names it."""
    try:
        return to_symbol(str(code))
    except ValueError:
        return str(code)


def board_of(symbol: str) -> Board:
    """The board a symbol is listed on: 300/301/302 ChiNext, 688/689 STAR, 4/8/920 BSE, else
    main."""
    code = to_symbol(symbol)[:6]
    if code.startswith(("300", "301", "302")):
        return Board.CHINEXT
    if code.startswith(("688", "689")):
        return Board.STAR
    if code[0] in "48" or code.startswith("920"):
        return Board.BSE
    return Board.MAIN


def risk_warning(name: str) -> bool:
    """True when a security's name on a date marks it as under risk warning (ST, *ST)."""
    return bool(RISK_WARNING_NAME.match(str(name)))

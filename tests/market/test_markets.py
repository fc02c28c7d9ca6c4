"""Markets by exchange: symbol spelling, calendars, benchmarks and rule sets (A-share boards vs the
generic set)."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from oomrl.market import calendar, markets
from oomrl.market.markets import GenericRules, get_market, market_of, normalize
from oomrl.market.rules import AShareRules
from oomrl.portfolio.setup import market_rules
from oomrl.settings import OomrlSettings, SettingsError, get_settings


@pytest.mark.parametrize(
    ("text", "market", "symbol", "name"),
    [
        ("600519", None, "600519.SH", "cn"),
        ("600519.SS", "cn", "600519.SH", "cn"),
        ("aapl", None, "AAPL", "us"),
        ("BRK-B", "us", "BRK-B", "us"),
        ("0700.hk", None, "0700.HK", "hk"),
        ("700", "hk", "0700.HK", "hk"),
        ("^gspc", "us", "^GSPC", "us"),
        ("VOD.L", None, "VOD.L", "other:L"),
    ],
)
def test_symbols_are_spelled_the_way_their_market_reads_them(
    text: str, market: str | None, symbol: str, name: str
) -> None:
    assert normalize(text, market) == symbol and market_of(symbol).name == name


def test_bad_symbols_and_markets_are_named() -> None:
    for text in ("600519", "hello world", ""):
        assert not markets.is_symbol(text)
    with pytest.raises(ValueError, match="A-share codes need"):
        normalize("600519", "us")
    with pytest.raises(ValueError):
        normalize("AAPL", "cn")
    with pytest.raises(ValueError, match="unknown market 'mars'"):
        get_market("mars")
    with pytest.raises(ValueError, match="several markets"):
        markets.market_of_symbols(["AAPL", "600519.SH"])
    assert (
        markets.market_of_symbols([]).name == "cn"
        and markets.market_of_symbols(["AAPL", "MSFT"]).name == "us"
    )
    assert markets.calendar_of("nonsense!") is None and markets.market_name("nonsense!") is None


def test_calendars_and_benchmarks_per_market() -> None:
    assert [get_market(n).benchmark for n in ("cn", "us", "hk")] == ["000300", "^GSPC", "^HSI"]
    assert (
        markets.market_of_index("^HSI").calendar == "XHKG"
        and markets.market_of_index("000905").name == "cn"
    )
    assert markets.market_of_index("not a code").calendar is None
    assert market_of("VOD.L").calendar == "XLON" and market_of("X.ZZ").calendar is None
    assert calendar.is_session("2025-07-04", "XSHG") and not calendar.is_session(
        "2025-07-04", "XNYS"
    )


def test_rule_sets_and_settings_overrides() -> None:
    assert isinstance(get_market("cn").rules(), AShareRules)
    us, hk = get_market("us").rules(), get_market("hk").rules()
    assert isinstance(us, GenericRules) and (us.lot_size, us.commission_rate, us.t_plus_one) == (
        1,
        0.0,
        False,
    )
    assert hk.tax_rates(date(2025, 1, 2)) == (0.001, 0.001) and hk.lot_rules(["0700.HK"])[
        0
    ].tolist() == [100]
    assert np.isnan(
        us.limit_fractions(
            ["AAPL"],
            np.array(["2025-01-02"], dtype="datetime64[ns]"),
            np.zeros((1, 1)),
            np.full((1, 1), np.nan),
            np.full((1, 1), np.datetime64("NaT"), dtype="datetime64[ns]"),
        )
    ).all()
    settings = OomrlSettings(market={"rules": {"us": {"lot_size": 10}}})
    assert market_rules(settings, "us").lot_rules(["AAPL"])[0].tolist() == [10]
    with pytest.raises(
        SettingsError, match="hk: lot_size: Input should be greater than or equal to 1"
    ):
        get_settings(
            market={"rules": {"hk": {"lot_size": 0}}}
        )  # refused when the settings are read


def test_row_limits_of_a_long_frame() -> None:
    got = markets.row_limit_fractions(
        ["600000.SH", "AAPL", "300750.SZ"],
        np.array(["2020-08-21", "2020-08-21", "2020-08-21"], "datetime64[ns]"),
        np.array([1.0, np.nan, np.nan]),
        np.array(["NaT", "NaT", "NaT"], dtype="datetime64[ns]"),
    )
    assert got[0] == 0.05 and np.isnan(got[1]) and got[2] == 0.10
    assert np.isnan(
        markets.row_limit_fractions(
            ["AAPL"],
            np.array(["2025-01-02"], "datetime64[ns]"),
            np.array([np.nan]),
            np.array(["NaT"], "datetime64[ns]"),
        )
    ).all()

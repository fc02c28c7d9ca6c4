"""The strategy API: MarketView (nothing after as_of), History (append-only, shared rows read-only)
and the shared helpers."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategy_api import (
    History,
    MarketView,
    StrategyParams,
    check_weights,
    equal_weights,
    iso_week,
    momentum,
    top_k,
)


def make_panels(
    days: int = 10, symbols: tuple[str, ...] = ("A", "B", "C")
) -> dict[str, pd.DataFrame]:
    """Closes rising 1 %, 2 %, 3 % ... a day per symbol; volume 1000 shares; amount left NaN."""
    index = pd.bdate_range("2024-01-01", periods=days)
    growth = {s: (1 + 0.01 * (i + 1)) ** np.arange(days) * 10.0 for i, s in enumerate(symbols)}
    close = pd.DataFrame(growth, index=index)
    volume = pd.DataFrame(1000.0, index=index, columns=list(symbols))
    amount = pd.DataFrame(np.nan, index=index, columns=list(symbols))
    return {"close": close, "volume": volume, "amount": amount}


def test_view_hides_rows_after_the_decision_date() -> None:
    panels = make_panels()
    as_of = panels["close"].index[4]
    view = MarketView(panels, as_of, portfolio_value=5.0)
    assert view.as_of == as_of
    assert view.panel("close").index.max() == as_of
    assert len(view.panel("close")) == 5
    assert view.portfolio_value == 5.0
    assert set(view.fields) == {"close", "volume", "amount"}


def test_view_panel_is_a_copy_so_a_strategy_cannot_mutate_the_market() -> None:
    panels = make_panels()
    view = MarketView(panels, panels["close"].index[-1])
    copy = view.panel("close")
    copy.iloc[:, :] = -1.0
    assert (view.panel("close") > 0).all().all()


def test_view_rejects_missing_close_and_unknown_fields() -> None:
    panels = make_panels()
    with pytest.raises(ValueError, match="close"):
        MarketView({"volume": panels["volume"]}, date(2024, 1, 5))
    with pytest.raises(ValueError, match="unknown panel fields"):
        MarketView({**panels, "future_close": panels["close"]}, date(2024, 1, 5))


def test_unknown_field_and_bad_history_length_are_errors() -> None:
    view = MarketView(make_panels(), date(2024, 1, 5))
    with pytest.raises(KeyError, match="high"):
        view.panel("high")
    with pytest.raises(ValueError, match="rows"):
        view.history("close", 0)


def test_history_returns_the_last_rows_up_to_as_of() -> None:
    panels = make_panels()
    view = MarketView(panels, panels["close"].index[6])
    tail = view.history("close", 3)
    assert list(tail.index) == list(panels["close"].index[4:7])


def test_universe_lists_only_names_traded_on_the_decision_date() -> None:
    panels = make_panels()
    panels["close"].loc[panels["close"].index[5], "B"] = np.nan
    view = MarketView(panels, panels["close"].index[5])
    assert view.universe() == ["A", "C"]


def test_universe_keeps_only_index_members_when_membership_is_given() -> None:
    panels = make_panels()
    view = MarketView(panels, panels["close"].index[5], members=["C", "A", "Z"])
    assert view.universe() == ["A", "C"]


def test_history_is_a_copy_too() -> None:
    panels = make_panels()
    view = MarketView(panels, panels["close"].index[-1])
    tail = view.history("close", 2)
    tail.iloc[:, :] = 0.0
    assert (view.history("close", 2) > 0).all().all()


def test_universe_is_empty_when_the_decision_date_is_not_a_session() -> None:
    panels = make_panels()
    assert MarketView(panels, date(2024, 1, 6)).universe() == []  # a Saturday
    assert MarketView(panels, date(2023, 12, 1)).universe() == []  # before any data


def test_traded_value_prefers_amount_and_falls_back_to_close_times_volume() -> None:
    panels = make_panels(days=3)
    panels["amount"].loc[:, "A"] = 5000.0
    view = MarketView(panels, panels["close"].index[-1])
    value = view.traded_value(2)
    assert value["A"] == pytest.approx(5000.0)
    expected_b = (panels["close"]["B"].iloc[1:] * 1000.0).mean()
    assert value["B"] == pytest.approx(expected_b)


def test_traded_value_without_amount_panel_and_without_volume() -> None:
    panels = make_panels(days=3)
    no_amount = MarketView({"close": panels["close"], "volume": panels["volume"]}, date(2024, 1, 3))
    assert no_amount.traded_value(1)["C"] == pytest.approx(panels["close"]["C"].iloc[-1] * 1000.0)
    with pytest.raises(KeyError, match="volume"):
        MarketView({"close": panels["close"]}, date(2024, 1, 3)).traded_value(1)


def test_momentum_measures_change_over_lookback_and_skips_recent_days() -> None:
    panels = make_panels()
    view = MarketView(panels, panels["close"].index[-1])
    plain = momentum(view, 2)
    assert plain["A"] == pytest.approx(1.01**2 - 1)
    assert plain["C"] == pytest.approx(1.03**2 - 1)
    skipped = momentum(view, 2, skip=3)
    close = panels["close"]
    assert skipped["B"] == pytest.approx(close["B"].iloc[-4] / close["B"].iloc[-6] - 1)


def test_momentum_is_empty_without_enough_history_and_drops_bad_values() -> None:
    panels = make_panels(days=3)
    view = MarketView(panels, panels["close"].index[-1])
    assert momentum(view, 5).empty
    panels["close"].iloc[0, 0] = 0.0  # a zero start price gives inf, which is dropped
    view = MarketView(panels, panels["close"].index[-1])
    assert "A" not in momentum(view, 2).index
    with pytest.raises(ValueError, match="lookback"):
        momentum(view, 0)
    with pytest.raises(ValueError, match="skip"):
        momentum(view, 1, skip=-1)


def test_equal_weights_and_check_weights() -> None:
    assert equal_weights([], 0.9) == {}
    assert equal_weights(["A", "B"], 0.5) == {"A": 0.25, "B": 0.25}
    assert check_weights({"A": 0.5, "B": 0.0, "C": 0.5}) == {"A": 0.5, "C": 0.5}
    with pytest.raises(ValueError, match="sum"):
        check_weights({"A": 0.7, "B": 0.4})
    with pytest.raises(ValueError, match="B"):
        check_weights({"A": 0.5, "B": -0.1})
    with pytest.raises(ValueError, match="finite"):
        check_weights({"A": float("nan")})


def test_iso_week_and_params_are_strict() -> None:
    assert iso_week(date(2024, 12, 30)) == (2025, 1)
    assert iso_week(date(2024, 7, 5)) == (2024, 27)

    class Knobs(StrategyParams):
        size: int = 1

    with pytest.raises(ValueError):
        Knobs(sise=2)  # a typo is rejected, not silently ignored
    with pytest.raises(ValueError):
        Knobs().size = 3  # type: ignore[misc]


def test_top_k_picks_as_the_pandas_sort_does_with_ties_and_gaps() -> None:
    scores = pd.Series([0.1, np.nan, 0.3, 0.1, 0.3, -0.2], index=list("ABCDEF"))
    expected = scores.sort_values(ascending=False, kind="stable").index[:4].tolist()
    assert top_k(scores, 4) == expected == ["C", "E", "A", "D"]
    among = ["F", "D", "Z", "B", "A", "C"]
    expected = (
        scores.reindex(among)
        .dropna()
        .sort_values(ascending=False, kind="stable")
        .index[:3]
        .tolist()
    )
    assert top_k(scores, 3, among=among) == expected == ["C", "D", "A"]
    assert top_k(scores.iloc[:0], 2) == []


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.sampled_from([0.0, 0.1, 0.2, -0.1, np.nan, np.inf, -np.inf]) | st.floats(-1, 1),
        max_size=60,
    ),
    k=st.integers(0, 70),
)
def test_top_k_equals_the_stable_pandas_sort_for_any_size_and_ties(
    values: list[float], k: int
) -> None:
    # top_k sorts only the values that can be picked (a partition first); the picks must not change.
    scores = pd.Series(values, index=[f"S{i:02d}" for i in range(len(values))], dtype=float)
    expected = scores.dropna().sort_values(ascending=False, kind="stable").index[:k].tolist()
    assert top_k(scores, k) == expected


def test_a_view_from_a_history_matches_one_from_panels_and_cannot_write_the_market() -> None:
    panels = make_panels()
    panels["close"].loc[panels["close"].index[5], "B"] = np.nan
    history = History(["A", "B", "C"], list(panels))
    history.append(
        panels["close"].index.values[:6], {f: p.to_numpy()[:6] for f, p in panels.items()}
    )
    as_of = panels["close"].index[5]
    streamed, plain = history.view(), MarketView(panels, as_of)
    assert streamed.as_of == plain.as_of == as_of
    assert streamed.universe() == plain.universe() == ["A", "C"]
    pd.testing.assert_series_equal(momentum(streamed, 2), momentum(plain, 2))
    pd.testing.assert_frame_equal(streamed.history("volume", 3), plain.history("volume", 3))
    values = streamed.values("close")
    assert values.shape == (6, 3) and list(streamed.symbols) == ["A", "B", "C"]
    with pytest.raises(ValueError, match="read-only"):
        values[0, 0] = 1.0  # the market's own data: a view cannot write into it


def test_a_view_from_panels_keeps_no_row_after_as_of_anywhere() -> None:
    panels = make_panels()
    view = MarketView(panels, panels["close"].index[3])
    for array in (view.values("close"), view.values("close").base):
        assert len(array) == 4  # not a window on the whole panel: the later rows were never copied
    assert view.dates.max() == panels["close"].index[3]


def test_a_history_refuses_rows_out_of_order_or_of_the_wrong_shape_and_an_earlier_decision() -> (
    None
):
    panels = make_panels()
    history = History(["A", "B", "C"], ["close"])
    history.append(panels["close"].index.values[2:4], {"close": panels["close"].to_numpy()[2:4]})
    with pytest.raises(ValueError, match="increasing"):
        history.append(panels["close"].index.values[:1], {"close": panels["close"].to_numpy()[:1]})
    with pytest.raises(ValueError, match="shape"):
        history.append(panels["close"].index.values[5:6], {"close": np.zeros((1, 2))})
    with pytest.raises(ValueError, match="exactly the fields"):
        history.append(panels["close"].index.values[5:6], {"volume": np.zeros((1, 3))})
    with pytest.raises(ValueError, match="never holds a later row"):
        history.view(as_of=panels["close"].index[2])
    # A Saturday after the last session
    assert history.view(as_of=date(2024, 1, 6)).universe() == []


def test_a_shared_history_is_read_only_and_extends_only_forward() -> None:
    days = pd.bdate_range("2024-01-01", periods=4).values.astype("datetime64[ns]")
    memory = np.arange(12, dtype=float).reshape(4, 3)
    days.flags.writeable = memory.flags.writeable = False
    history = History.over(["A", "B", "C"], ["close"], days, {"close": memory})
    history.extend(2)
    view = history.view()
    assert view.as_of == pd.Timestamp(days[1]) and view.values("close").shape == (2, 3)
    with pytest.raises(ValueError, match="extend"):
        history.extend(1)
    with pytest.raises(ValueError, match="written by its owner"):
        history.append(days[2:3], {"close": memory[2:3]})
    with pytest.raises(ValueError, match="float64"):
        History.over(["A"], ["close"], days, {"close": memory})


def test_holdings_are_a_read_only_mapping_fetched_once_on_first_read() -> None:
    from strategy_api import Holdings

    fetched: list[int] = []

    def book() -> dict[str, float]:
        fetched.append(1)
        return {"600000.SH": 0.25, "600001.SH": 0.5}

    holdings = Holdings(book)
    assert fetched == []  # nothing is read before S looks
    assert holdings["600001.SH"] == 0.5 and len(holdings) == 2 and "600000.SH" in holdings
    assert dict(holdings) == holdings.copy() == {"600000.SH": 0.25, "600001.SH": 0.5}
    assert holdings.get("600002.SH", 0.0) == 0.0 and fetched == [1]
    with pytest.raises(TypeError):
        holdings["600000.SH"] = 1.0  # type: ignore[index]
    assert (
        Holdings({"A": 1}) == {"A": 1.0}
        and Holdings() == {}
        and repr(Holdings({"A": 1})) == "Holdings({'A': 1.0})"
    )


def test_a_failing_book_fails_every_read_alike() -> None:
    from strategy_api import Holdings

    def broken() -> dict[str, float]:
        raise LookupError("no book")

    holdings = Holdings(broken)
    for _ in range(2):
        with pytest.raises(LookupError, match="no book"):
            len(holdings)


def test_the_portfolio_value_is_read_on_first_use() -> None:
    history = History(["600000.SH"], ["close"])
    history.append(np.array(["2024-01-02"], dtype="datetime64[ns]"), {"close": np.array([[10.0]])})
    asked: list[int] = []

    def value() -> float:
        asked.append(1)
        return 2e7

    view = history.view(value)
    assert asked == []
    assert view.portfolio_value == 2e7 and view.portfolio_value == 2e7 and asked == [1]
    assert history.view(3).portfolio_value == 3.0
    with pytest.raises(ValueError):
        history.view("a lot")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        view.portfolio_value = 1.0  # type: ignore[misc]


def test_momentum_series_are_the_constructors_series() -> None:
    from strategy_api import helpers

    values, labels = (
        np.array([0.1, -0.2, np.inf, 0.0]),
        pd.Index(["A", "B", "C", "D"], dtype=object),
    )
    made, expected = helpers._series(values, labels), pd.Series(values, index=labels)
    pd.testing.assert_series_equal(made, expected)
    assert vars(made).keys() == vars(expected).keys() and made.name is None and made.index is labels
    assert repr(made) == repr(expected) and made.sort_values().index.tolist() == [
        "B",
        "D",
        "A",
        "C",
    ]


def test_a_pandas_whose_manager_builds_another_series_gets_the_constructor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pandas.core import internals

    from strategy_api import helpers

    assert helpers._series_maker().__name__ == "fast"  # this pandas: through its block manager
    monkeypatch.setattr(
        internals.SingleBlockManager,
        "from_array",
        classmethod(lambda cls, values, index: (_ for _ in ()).throw(TypeError("gone"))),
    )
    assert helpers._series_maker().__name__ == "plain"
    monkeypatch.undo()
    monkeypatch.setattr(
        pd.Series, "_from_mgr", classmethod(lambda cls, mgr, axes: pd.Series([1.0]))
    )
    assert helpers._series_maker().__name__ == "plain"

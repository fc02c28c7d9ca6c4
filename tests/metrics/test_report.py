"""Charts and the tearsheet: files are written, the HTML is self-contained and names its
benchmark."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from oomrl.metrics import charts, factors
from oomrl.metrics.io import read_returns_csv
from oomrl.metrics.performance import Phase, read_phases
from oomrl.metrics.tearsheet import build_report, format_value
from tests.metrics.conftest import CSI300_PRICE, CSI300_TOTAL_RETURN, TABLE1_PHASES


class _References(HTMLParser):
    """Collects every URL an HTML page would fetch."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.images = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.urls.append(value)
        self.images += tag == "img"


def _portfolio(bench: pd.Series) -> pd.Series:
    rng = np.random.default_rng(11)
    return (0.9 * bench + rng.normal(0.0002, 0.005, len(bench))).rename("portfolio")


@pytest.mark.slow
def test_report_against_benchmark_is_self_contained(tmp_path: Path) -> None:
    bench = read_returns_csv(CSI300_TOTAL_RETURN)
    port = _portfolio(bench)
    phases = read_phases(TABLE1_PHASES)[1:]
    report = build_report(
        port,
        tmp_path / "r",
        benchmark=bench,
        benchmark_kind="total_return",
        phases=phases,
        title="Paper account",
    )
    assert [p.name for p in report.pngs] == ["equity.png", "underwater.png", "rolling_ir.png"]
    for png in report.pngs:
        height, width = mpimg.imread(png).shape[:2]
        assert (width, height) == (1100, 528)  # 10 × 4.8 inches at 110 dpi
    page = report.html.read_text()
    refs = _References()
    refs.feed(page)
    assert refs.images == 3
    assert refs.urls and all(url.startswith("data:image/png;base64,") for url in refs.urls)
    # Base64 may spell "http" by chance
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:", page)
    assert "<link" not in text and "<script" not in text and "http" not in text
    assert "CSI 300 total-return index (H00300)" in page
    summary = report.markdown.read_text()
    assert "Benchmark: CSI 300 total-return index (H00300)" in summary
    assert (
        "|  | Phase 1 | Phase 2 | Phase 3 |" in summary
        and "| Sessions | 73 | 235 | 94 |" in summary
    )
    assert "![rolling_ir](rolling_ir.png)" in summary
    assert report.metrics["trading_days"] == len(port)


@pytest.mark.slow
def test_plain_series_report_has_no_benchmark_sections(tmp_path: Path) -> None:
    csi300 = read_returns_csv(CSI300_PRICE)
    report = build_report(csi300, tmp_path, phases=read_phases(TABLE1_PHASES), title="CSI 300")
    assert [p.name for p in report.pngs] == ["equity.png", "underwater.png"]
    assert "beta" not in report.metrics
    summary = report.markdown.read_text()
    assert "Benchmark: none" in summary
    assert "| Annualized return (% a year) | 21.16 % | 48.16 % | 19.22 % | 5.04 % |" in summary
    assert "| To | 2026-02-27 | 2024-10-18 | 2025-09-30 | 2026-02-27 |" in summary


@pytest.mark.slow
def test_style_table_in_report(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    dates = pd.bdate_range("2024-07-01", periods=120)
    cols = [f"S{i}" for i in range(30)]
    close = (
        10 * (1 + pd.DataFrame(rng.normal(0, 0.02, (120, 30)), index=dates, columns=cols)).cumprod()
    )
    volume = pd.DataFrame(rng.lognormal(12, 1, (120, 30)), index=dates, columns=cols)
    styles = factors.style_factor_returns(close, factors.traded_value(close, volume))
    bench = close.pct_change().mean(axis=1).fillna(0.0).rename("benchmark")
    port = (bench + 0.3 * styles["volatility"].fillna(0) + rng.normal(0, 0.001, 120)).rename("p")
    attribution = factors.style_attribution(port, bench, styles)
    report = build_report(port, tmp_path, benchmark=bench, attribution=attribution)
    summary = report.markdown.read_text()
    assert "## Style attribution" in summary
    split = attribution.split_table().set_index("component")["annual"]
    assert (
        f"| pure idiosyncratic alpha | {split['pure idiosyncratic alpha'] * 100:.2f} % |" in summary
    )
    assert split["tracking error"] == pytest.approx(attribution.tracking_error)
    assert "Style attribution (market + High-Low factors)" in report.html.read_text()


def test_bad_benchmark_kind(tmp_path: Path) -> None:
    r = read_returns_csv(CSI300_PRICE)
    with pytest.raises(ValueError, match="benchmark kind"):
        build_report(r, tmp_path, benchmark=r, benchmark_kind="dividends")


def test_rolling_chart_without_phases_and_value_format(tmp_path: Path) -> None:
    r = read_returns_csv(CSI300_PRICE)
    path = charts.rolling_ir_chart(
        r * 1.1, r, tmp_path / "ir.png", [Phase("v1", r.index[0], r.index[-1])]
    )
    assert path.stat().st_size > 10_000
    assert format_value("sharpe", None) == "—" and format_value("cagr", 0.1234) == "12.34 %"
    assert format_value("beta", 1.23456) == "1.235" and format_value("sessions", 5) == "5"
    assert format_value("phase", "x") == "x" and format_value("sharpe", float("nan")) == "—"


def test_aggregate_phases_are_not_shaded() -> None:
    from matplotlib.figure import Figure

    phases = read_phases(TABLE1_PHASES)  # "Whole study" contains the three phases
    ax = Figure().add_subplot()
    charts._shade(ax, phases)
    assert [patch.get_label() for patch in ax.patches] == ["Phase 1", "Phase 2", "Phase 3"]


@pytest.mark.slow
@pytest.mark.skipif(
    not (shutil.which("chromium") or shutil.which("chromium-browser")),
    reason="chromium is not installed",
)
def test_tearsheet_renders_in_a_browser_with_the_network_cut(tmp_path: Path) -> None:
    """Headless chromium, every request sent to a dead proxy: the page still shows its charts."""
    bench = read_returns_csv(CSI300_PRICE)
    report = build_report(_portfolio(bench), tmp_path / "r", benchmark=bench, title="Offline")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            str(browser),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--proxy-server=127.0.0.1:9",
            "--window-size=1000,1600",
            f"--screenshot={shot}",
            report.html.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    pixels = mpimg.imread(shot)[:, :, :3]
    # the equity line's blue must be on screen: the inlined PNGs rendered without any network
    blue = (abs(pixels[:, :, 0] - 0x1F / 255) < 0.08) & (abs(pixels[:, :, 2] - 0x9C / 255) < 0.08)
    assert blue.sum() > 500


@pytest.mark.slow
def test_short_history_says_why_there_is_no_rolling_ir(tmp_path: Path) -> None:
    bench = read_returns_csv(CSI300_PRICE).iloc[:40]
    report = build_report(_portfolio(bench), tmp_path, benchmark=bench)
    assert [p.name for p in report.pngs] == ["equity.png", "underwater.png"]
    assert "No rolling 60-day IR chart: only 40 sessions." in report.markdown.read_text()

"""Build the bundled data/sample snapshot from a folder of raw inputs (run: python
scripts/build_sample.py RAW [OUT])."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sample_raw import factors, raw_closes

from oomrl.data.schema import BAR_COLUMNS, SHARES_PER_LOT, yyyymmdd
from oomrl.data.validation import validate_bars, validate_index
from oomrl.market.boards import risk_warning, to_symbol
from oomrl.market.calendar import sessions
from oomrl.market.universe import membership_from_changes

REPO = Path(__file__).resolve().parent.parent

SAMPLE_END = pd.Timestamp("2026-02-27")  # last session of the paper's study window
# Main-board history for look-backs; ChiNext/STAR start 2024-01-02
BARS_START = pd.Timestamp("2019-01-01")
# The 2024-01 member list took effect at the Dec-2023 review
BASE_EFFECTIVE = pd.Timestamp("2023-12-11")
PANEL_MAIN = "panel_tushare_qfq_mainboard_2019_2026-03"
PANEL_ALL = "panel_tushare_qfq_all_boards_2024_2025-08"
PANEL_YF = "panel_yfinance_2025-03_2026-02"
PANEL_SINA = "panel_sina_qfq_2010_2026-06"
PANEL_AK = "panel_akshare_hist_2020_2024"
STITCH_WINDOW = 10  # overlap days (nearest the switch) used for the level ratio
PANEL_STARTS = {
    PANEL_MAIN: pd.Timestamp("2019-01-02"),
    PANEL_ALL: pd.Timestamp("2024-01-02"),
    PANEL_YF: pd.Timestamp("2025-03-03"),
}  # each panel's first session
LISTING_GAP = 10  # a first bar this many sessions after its panel's first day is the listing day
# Listings the panels cannot show as a first bar: 000792 (Qinghai Salt Lake) was delisted in 2020
# and relisted on 2021-08-10 (a 313-session gap and +306 % on the day, no price limit on a relisting
# day).
RELISTINGS = {"000792": "2021-08-10"}
# yfiua monthly member lists the shared README verified (the others are stale): names around the
# 1st.
VERIFIED_SNAPSHOTS = [
    *(f"2024-{m:02d}" for m in range(1, 7)),
    *(f"2025-{m:02d}" for m in range(4, 13)),
    *(f"2026-{m:02d}" for m in range(1, 7)),
]


def _tushare(path: Path) -> pd.DataFrame:
    """Tushare qfq panel file: date,open,close,high,low,volume(LOTS) -> shares."""
    frame = pd.read_csv(path, parse_dates=["date"])
    frame["volume"] = frame["volume"] * SHARES_PER_LOT
    return frame[["date", "open", "high", "low", "close", "volume"]]


def _yfinance(path: Path) -> pd.DataFrame:
    """Flattened yfinance file: header, a ticker row to skip, then
    code,Date,Open,High,Low,Close,Volume(shares)."""
    frame = pd.read_csv(path, skiprows=[1], dtype={"Ticker": str}, parse_dates=["Date"])
    frame = frame.rename(columns=str.lower)
    return frame[["date", "open", "high", "low", "close", "volume"]].astype({"volume": "float64"})


def _amounts(src: Path, code: str) -> pd.Series:
    """Turnover in CNY by date from the panels that have it (amount is unadjusted, so panels may be
    mixed)."""
    parts = []
    for folder in (PANEL_SINA, PANEL_AK):
        path = src / folder / f"{code}.csv"
        if path.exists():
            frame = pd.read_csv(path, encoding="utf-8-sig", parse_dates=["date"])
            parts.append(frame.set_index("date")["amount"])
    if not parts:
        return pd.Series(dtype="float64")
    merged = pd.concat(parts)
    return merged[~merged.index.duplicated(keep="first")]


def stitch(older: pd.DataFrame, newer: pd.DataFrame) -> tuple[pd.DataFrame, float, float]:
    """Join two qfq series with different anchors by returns: older prices are rescaled to newer's
    level.

    Older rows are kept up to their last date, newer rows after it. Returns (frame, factor, spread),
    where spread is the relative range of the close ratio over the window (a check that the anchors
    differ only by a constant, as they should when neither series has a gap).
    """
    common = older.merge(newer, on="date", suffixes=("_o", "_n"))
    if common.empty:
        raise ValueError("no overlap to stitch on")
    tail = common.tail(STITCH_WINDOW)
    ratio = tail["close_n"] / tail["close_o"]
    factor = float(ratio.median())
    spread = float(ratio.max() / ratio.min() - 1)
    scaled = older.copy()
    for col in ("open", "high", "low", "close"):
        scaled[col] = (scaled[col] * factor).round(4)
    cut = older["date"].max()
    return pd.concat([scaled, newer[newer["date"] > cut]], ignore_index=True), factor, spread


def member_bars(src: Path, code: str, log: list[str]) -> pd.DataFrame | None:
    """One member's bars on a single qfq basis, from the best panel(s) available."""
    main, allb, yfp = (src / p / f"{code}.csv" for p in (PANEL_MAIN, PANEL_ALL, PANEL_YF))
    if main.exists():
        frame, how, panel_start = _tushare(main), "tushare-main", PANEL_STARTS[PANEL_MAIN]
    elif allb.exists() and yfp.exists():
        frame, factor, spread = stitch(_tushare(allb), _yfinance(yfp))
        how = f"tushare-all x{factor:.4f} + yfinance (ratio spread {spread:.2%})"
        panel_start = PANEL_STARTS[PANEL_ALL]
    elif allb.exists():
        frame, how, panel_start = _tushare(allb), "tushare-all only", PANEL_STARTS[PANEL_ALL]
    elif yfp.exists():
        frame, how, panel_start = _yfinance(yfp), "yfinance only", PANEL_STARTS[PANEL_YF]
    else:
        log.append(f"| {code} | no panel has this code | - | - |")
        return None
    frame = frame[(frame["date"] >= BARS_START) & (frame["date"] <= SAMPLE_END)].copy()
    frame["symbol"] = to_symbol(code)
    amount = _amounts(src, code)
    frame["amount"] = frame["date"].map(amount).astype("float64")
    frame["adjustment"] = "qfq"
    frame["prev_close_raw"] = np.nan
    raw = raw_closes(src, code)
    factor, exact = factors(frame.set_index("date")["close"], raw)
    frame["factor"] = factor.to_numpy()
    # Where the traded prices are known, the adjusted prices become raw x factor exactly (they moved
    # by less than the panels' own 0.005 rounding), so adjusted / factor gives back the raw price.
    known_raw = raw.set_index("date").reindex(frame["date"])
    exact_rows = frame["factor"].notna().to_numpy() & known_raw["raw_close"].notna().to_numpy()
    for column in ("open", "high", "low", "close"):
        values = known_raw[f"raw_{column}"].to_numpy(dtype=float) * frame["factor"].to_numpy()
        # 4 decimals still round-trip
        frame.loc[exact_rows, column] = np.round(values[exact_rows], 4)
    frame["st"] = np.nan
    frame["list_date"] = listing_dates(code, frame["date"], panel_start)
    # prev_close_raw is the previous bar's close on the same basis: SampleSource derives it on load,
    # so the file does not carry a shifted copy of the closes.
    frame = frame[list(BAR_COLUMNS)]
    first, last = frame["date"].min(), frame["date"].max()
    known = frame["factor"].notna()
    coverage = (
        f"{frame.loc[known, 'date'].min():%Y-%m-%d}..{frame.loc[known, 'date'].max():%Y-%m-%d} "
        f"({int(known.sum())} days, {', '.join(sorted(set(raw['source'])))}; panel agreed "
        f"{exact:.1%})"
        if known.any()
        else "unknown"
    )
    log.append(
        f"| {code} | {how} | {first:%Y-%m-%d}..{last:%Y-%m-%d} ({len(frame)}) | {coverage} |"
    )
    return frame


def listing_dates(code: str, dates: pd.Series, panel_start: pd.Timestamp) -> np.ndarray:
    """list_date (YYYYMMDD) per row: the first bar when it comes well after its panel's first day
    (an IPO), a known relisting for the rows from it on, NaN otherwise (listed before the data
    starts)."""
    out = np.full(len(dates), np.nan)
    first = dates.min()
    if len(sessions(panel_start, first)) > LISTING_GAP:
        out[:] = yyyymmdd([first])[0]
    if code in RELISTINGS:
        relisted = pd.Timestamp(RELISTINGS[code])
        out[(dates >= relisted).to_numpy()] = yyyymmdd([relisted])[0]
    return out


def st_flags(src: Path, bars: pd.DataFrame) -> pd.Series:
    """Risk-warning flag from member names on the first session of each verified monthly snapshot;
    NaN elsewhere."""
    flags = pd.Series(np.nan, index=bars.index)
    position = pd.Series(bars.index, index=pd.MultiIndex.from_frame(bars[["date", "symbol"]]))
    for month in VERIFIED_SNAPSHOTS:
        names = pd.read_csv(src / f"membership/csi300_members_{month}.csv", dtype=str)
        first = sessions(f"{month}-01", pd.Timestamp(f"{month}-01") + pd.Timedelta(days=14))[0]
        for symbol, name in zip(names["Symbol"].map(to_symbol), names["Name"], strict=True):
            row = position.get((first, symbol))
            if row is not None:
                flags.loc[row] = 1.0 if risk_warning(name) else 0.0
    return flags


def build_index(src: Path) -> pd.DataFrame:
    """CSI 300 price index (Baostock close) and total-return index H00300 (stored as code 000300,
    kind total_return)."""
    price = pd.read_csv(src / "index/sh000300_baostock.csv", parse_dates=["date"])[
        ["date", "close"]
    ]
    total = pd.read_csv(src / "index/h00300_csi300_total_return.csv", parse_dates=["date"])
    frames = [
        price.assign(code="000300", kind="price"),
        total.assign(code="000300", kind="total_return"),
    ]
    levels = pd.concat(frames, ignore_index=True)
    return levels[levels["date"] <= SAMPLE_END][["date", "code", "close", "kind"]]


def build_membership(src: Path) -> tuple[pd.DataFrame, bool]:
    """PIT membership (effective_date, symbol, name); also checks it against base list + change
    intervals."""
    pit = pd.read_csv(src / "membership/csi300_members_pit_by_effective_date.csv", dtype=str)
    pit["effective_date"] = pd.to_datetime(pit["effective_date"]).replace(
        pd.Timestamp("2024-01-01"), BASE_EFFECTIVE
    )
    pit["symbol"] = pit["code"].map(to_symbol)
    changes = pd.read_csv(src / "membership/csi300_membership_changes_2024-2026.csv", dtype=str)
    base = pit.loc[pit["effective_date"] == BASE_EFFECTIVE, "code"].tolist()
    derived = membership_from_changes(base, BASE_EFFECTIVE, changes)
    agrees = (
        derived.sort_values(["effective_date", "symbol"])
        .reset_index(drop=True)
        .equals(
            pit[["effective_date", "symbol"]]
            .sort_values(["effective_date", "symbol"])
            .reset_index(drop=True)
        )
    )
    return pit[["effective_date", "symbol", "name"]], agrees


NOTES = """# data/sample — provenance

Built by `scripts/build_sample.py` (in this repository) from a folder of raw inputs (RAW), byte-for-byte
copies of data files from the public GitHub repositories listed under *Inputs* at the commits named there.
Re-run: `.venv/bin/python scripts/build_sample.py RAW data/sample`, RAW holding the files at the *Inputs* paths.
Prices are facts; only yfiua/index-constituents (Apache-2.0) and 1EchA/Volatility-Regime-Momentum (MIT)
declare a licence. Keep this file with the data.

## Contents

| file | what |
|---|---|
| bars.parquet | {bar_rows} daily bars of {symbols} CSI 300 members, {first:%Y-%m-%d}..{last:%Y-%m-%d}, schema `oomrl.data.schema.BAR_COLUMNS` |
| index.parquet | {index_rows} CSI 300 levels: `kind=price` (000300) 2005-01-04.., `kind=total_return` (H00300, stored under code 000300) |
| membership.csv | point-in-time membership: effective_date, symbol, name; members on d = latest effective_date <= d |
| quarantine.csv | the {quarantined} input rows that failed `oomrl.data.validation` and are NOT in the sample, with reasons |
| BUILD_LOG.md | which panel(s) each member's bars came from, and the stitch factors |

## Decisions

- **One adjustment basis per symbol, qfq.** All bars are forward-adjusted (`adjustment = "qfq"`). Main-board
  members come from the single-anchor Tushare main-board panel (anchor 2026-03-18), 2019-01-02 onwards.
  ChiNext (300/301/302) and STAR (688) members are stitched *by returns*: the Tushare all-boards panel
  (2024-01-02..2025-08-25, anchor 2025-08-25) is multiplied by the median yfinance/Tushare close ratio of
  the last 10 overlapping sessions, and yfinance rows (auto_adjust=True) are used after 2025-08-25. The ratio
  is constant over the overlap to < 0.1 % for every stitched name (see BUILD_LOG.md). Price levels are never
  mixed across panels without that rescaling; prices of stitched rows are rounded to 4 decimals.
- **Volume is in shares.** Tushare volumes (lots, with decimals) are multiplied by 100; yfinance volume is
  already in shares.
- **Amount (CNY) is NaN where unknown.** The Tushare and yfinance panels carry no turnover. Amount is
  unadjusted, so it is taken by date from the Sina panel (47 large caps, 2010..2026-06) and the akshare
  `stock_zh_a_hist` panel (57 names, 2020..2024) where those have the day, else left NaN — never estimated.
  Use volume (shares) for ADV; amount/volume is a raw-price VWAP, not on the qfq basis of the prices.
- **Raw prices and the adjustment factor (Qlib's convention: adjusted = raw x factor).** `factor` is known
  where a panel gives the traded prices ({known_window:.1%} of the member-days of 2024-07-01..2026-02-27:
  {known_after:.1%} from 2025-03-03, {known_before:.1%} before; {known_all:.1%} of all rows), see
  `scripts/sample_raw.py`: the akshare `stock_zh_a_hist(adjust="")` panel (57 names, 2020..2024, raw
  prices), the baostock panel (5 names, qfq *unrounded*, so the ratio that puts a day's four prices on
  the 0.01 grid is found exactly) and the yfinance panel (2025-03-03..2026-02-27, `auto_adjust=True`
  prices are Yahoo's raw prices x Adj Close / Close: the same grid search recovers them). Between two
  ex-dates the factor is constant (the median of adjusted / raw over the stretch); where the traded
  prices are known, open/high/low/close are rewritten as raw x factor (4 decimals; they move by less
  than the panels' own 0.005 rounding) so that adjusted / factor gives the traded price back exactly.
  Elsewhere `factor` is NaN: the broker then uses the nearest known factor of the symbol (raw levels
  off by the dividends in between; returns stay exact) and replays report the share of fills priced
  from a known factor (`raw_prices_known`). BUILD_LOG.md lists the coverage per symbol.
- **prev_close_raw is left empty.** It is the previous bar's close on the same basis, which
  `SampleSource` derives on load; divided by the day's factor it is the exchange's reference price
  (the ex-rights price on an ex-date).
- **ST status (`st`).** The only dated names in the inputs are the monthly yfiua member lists. On the
  first session of each month whose list the shared README verified ({snapshots} months, 2024-01..06 and
  2025-04..2026-06) each listed member gets st = 1 when its name carries ST/*ST, else 0 ({st_rows} rows;
  none of the verified lists names a member under risk warning). Every other row is
  NaN (unknown), which the rules treat as not ST.
- **Listing days (`list_date`).** A symbol whose first bar comes more than {gap} sessions after its panel's
  first day is an IPO on that day ({listed} symbols); 000792 was relisted on 2021-08-10 (its rows from then
  carry that date). NaN means listed before the data starts. Limits on the first sessions after a
  listing follow `oomrl.market.limits` (none on the first 5 sessions of registration-era listings).
- **Membership.** `csi300_members_pit_by_effective_date.csv`; its first block (labelled 2024-01-01 there,
  the yfiua 2024-01 list) is stored with effective date 2023-12-11, the Dec-2023 review it reflects.
  Re-deriving it from that base list plus `csi300_membership_changes_2024-2026.csv` gives the same
  snapshots: {membership_ok}. The 2026-06-15 snapshot is kept although bars end on 2026-02-27.
  600837 (Haitong Securities, member until 2025-02-07) has no bars in any panel. Before 2023-12-11 the
  membership is unknown (`members_on` returns an empty list).
- **Index.** Price index: Baostock close (agrees with the Sina/akshare series to {cross_check:.3f} points at
  worst). Total return: H00300 from the same repository. Both cut at 2026-02-27.
- **Validation.** Every row passed `validate_bars` / `validate_index` (the rules of `oomrl ingest`, which
  judge price limits by board, date, ST flag and listing age). Rejected and listed in quarantine.csv:
  the spurious H00300 holiday row 2018-06-18. The relisting day of 000792 and the free days of the
  registration-era IPOs 001391 and 600930, quarantined by earlier versions, are in.
"""

USED = {  # folder -> what the sample takes from it
    "index/sh000300_baostock.csv": "CSI 300 price index close (kind=price)",
    "index/h00300_csi300_total_return.csv": "CSI 300 total-return index H00300 (kind=total_return)",
    "index/sh000300_sina_akshare.csv": "cross-check of the price index only",
    "membership/csi300_members_pit_by_effective_date.csv": "point-in-time membership",
    "membership/csi300_membership_changes_2024-2026.csv": "cross-check of the membership",
    PANEL_MAIN: "bars of main-board members (primary)",
    PANEL_ALL: "bars of ChiNext/STAR members 2024-01..2025-08 (rescaled)",
    PANEL_YF: "bars of ChiNext/STAR members after 2025-08-25",
    PANEL_SINA: "amount (CNY) only",
    PANEL_AK: "amount (CNY) only",
}


def pit_member_days(membership: pd.DataFrame, bars: pd.DataFrame) -> pd.DataFrame:
    """(date, symbol) pairs of `bars` whose symbol was a point-in-time member that day."""
    from oomrl.market.universe import members_on

    days = sorted(bars["date"].unique())
    pairs = [(day, symbol) for day in days for symbol in members_on(membership, day)]
    return pd.DataFrame(pairs, columns=["date", "symbol"])


def provenance_table(src: Path) -> str:
    """Source repository and commit of every input used, from the shared MANIFEST.csv."""
    manifest = pd.read_csv(src / "MANIFEST.csv", dtype=str)
    lines = ["| input | used for | source repository | commit | files |", "|---|---|---|---|---|"]
    for key, use in USED.items():
        rows = manifest[(manifest["file"] == key) | manifest["file"].str.startswith(key + "/")]
        for (repo, commit), group in rows.groupby(["source_repo", "commit"]):
            lines.append(f"| {key} | {use} | {repo} | {commit} | {len(group)} |")
    return "\n".join(lines)


def index_cross_check(src: Path) -> float:
    """Largest absolute close difference between Baostock and Sina CSI 300 over their common
    dates."""
    bao = pd.read_csv(src / "index/sh000300_baostock.csv", parse_dates=["date"]).set_index("date")[
        "close"
    ]
    sina = pd.read_csv(src / "index/sh000300_sina_akshare.csv", parse_dates=["date"]).set_index(
        "date"
    )["close"]
    both = pd.concat([bao, sina], axis=1, join="inner").loc[:SAMPLE_END]
    return float((both.iloc[:, 0] - both.iloc[:, 1]).abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "src", metavar="RAW", help="folder with the raw inputs at the paths PROVENANCE.md lists"
    )
    parser.add_argument("out", nargs="?", default=str(REPO / "data/sample"))
    args = parser.parse_args()
    src, out = Path(args.src), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    membership, agrees = build_membership(src)
    in_window = membership[membership["effective_date"] <= SAMPLE_END]
    codes = sorted({sym[:6] for sym in in_window["symbol"]})
    log: list[str] = []
    frames = [f for f in (member_bars(src, code, log) for code in codes) if f is not None]
    bars = pd.concat(frames, ignore_index=True)
    bars["st"] = st_flags(src, bars)
    checked = validate_bars(bars)
    levels = validate_index(build_index(src))
    quarantine = pd.concat(
        [checked.quarantined.assign(table="bars"), levels.quarantined.assign(table="index")],
        ignore_index=True,
    )

    checked.valid.sort_values(["date", "symbol"]).to_parquet(
        out / "bars.parquet", index=False, compression="zstd"
    )
    levels.valid.to_parquet(out / "index.parquet", index=False, compression="zstd")
    membership.assign(effective_date=membership["effective_date"].dt.strftime("%Y-%m-%d")).to_csv(
        out / "membership.csv", index=False
    )
    quarantine.to_csv(out / "quarantine.csv", index=False)
    window = checked.valid[(checked.valid["date"] >= "2024-07-01")]
    members = window.merge(pit_member_days(membership, window), on=["date", "symbol"])
    (out / "BUILD_LOG.md").write_text(
        "# Per-symbol source of the sample bars\n\n| code | panels | range (rows) | raw "
        "prices known (factor) |\n"
        "|---|---|---|---|\n" + "\n".join(log) + "\n"
    )
    (out / "PROVENANCE.md").write_text(
        NOTES.format(
            bar_rows=len(checked.valid),
            symbols=checked.valid["symbol"].nunique(),
            first=checked.valid["date"].min(),
            last=checked.valid["date"].max(),
            index_rows=len(levels.valid),
            membership_ok="yes" if agrees else "NO",
            cross_check=index_cross_check(src),
            quarantined=len(quarantine),
            known_window=members["factor"].notna().mean(),
            known_after=members.loc[members["date"] >= "2025-03-03", "factor"].notna().mean(),
            known_before=members.loc[members["date"] < "2025-03-03", "factor"].notna().mean(),
            known_all=checked.valid["factor"].notna().mean(),
            snapshots=len(VERIFIED_SNAPSHOTS),
            st_rows=int(checked.valid["st"].notna().sum()),
            gap=LISTING_GAP,
            listed=int(checked.valid.loc[checked.valid["list_date"].notna(), "symbol"].nunique()),
        )
        + "\n## Inputs\n\n"
        + provenance_table(src)
        + "\n"
    )
    print(
        f"bars: {len(checked.valid)} rows, {checked.valid['symbol'].nunique()} symbols; "
        f"quarantined {len(checked.quarantined)} bar rows {checked.reasons}; index quarantined "
        f"{len(levels.quarantined)} {levels.reasons}; membership matches change list: {agrees}"
    )


if __name__ == "__main__":
    main()

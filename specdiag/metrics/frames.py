"""pandas frames of the collected intervals, and their CSV / JSON / Parquet round trip.

Imported only by ``specdiag metrics`` (pandas is heavy). One row per logging interval per engine; the
schema below is fixed, so what ``write_frame`` writes, ``read_frame`` reloads into an equal DataFrame
(``pandas.testing.assert_frame_equal``): every measurement is float64 (NaN = not printed in that
interval), ``line`` int64, texts are strings.
"""

from __future__ import annotations

import json
from typing import Any

from specdiag.metrics.series import Interval

TEXT_COLS = ["time", "source", "engine"]
INT_COLS = ["line"]
FLOAT_COLS = [
    "t", "prompt_throughput", "generation_throughput", "running_reqs", "waiting_reqs", "kv_cache_usage",
    "prefix_cache_hit_rate", "external_prefix_cache_hit_rate", "preemptions", "accepted_tokens", "drafted_tokens",
    "draft_acceptance_rate", "mean_acceptance_length", "num_drafts",
]
POS_PREFIX = "pos_"


def _row(label: str, iv: Interval) -> dict[str, Any]:
    from specdiag.timeutil import fmt_time

    rate = iv.acceptance
    r = {
        "time": fmt_time(iv.t), "source": iv.path, "engine": label, "line": int(iv.line), "t": iv.t,
        "prompt_throughput": iv.prompt_tps, "generation_throughput": iv.gen_tps, "running_reqs": iv.running,
        "waiting_reqs": iv.waiting, "kv_cache_usage": iv.kv, "prefix_cache_hit_rate": iv.prefix,
        "external_prefix_cache_hit_rate": iv.ext, "preemptions": iv.preempt, "accepted_tokens": iv.acc,
        "drafted_tokens": iv.dr, "draft_acceptance_rate": rate, "mean_acceptance_length": iv.mal,
        "num_drafts": iv.ndrafts,
    }
    for i, p in enumerate(iv.pos or []):
        r[f"{POS_PREFIX}{i}"] = p
    return r


def columns(pos_n: int) -> list[str]:
    return TEXT_COLS + INT_COLS + FLOAT_COLS + [f"{POS_PREFIX}{i}" for i in range(pos_n)]


def normalise(df):
    """Apply the fixed schema (column order and dtypes) to a frame read back from any format."""
    pos_n = sum(1 for c in df.columns if str(c).startswith(POS_PREFIX))
    cols = columns(pos_n)
    for c in cols:
        if c not in df.columns:
            df[c] = float("nan") if c not in TEXT_COLS else ""
    df = df[cols].copy()
    for c in TEXT_COLS:
        df[c] = df[c].fillna("").astype(str)
    df["line"] = df["line"].astype("int64")
    for c in cols:
        if c not in TEXT_COLS and c != "line":
            df[c] = df[c].astype("float64")
    return df.reset_index(drop=True)


def to_frame(engines: list[tuple[str, list[Interval]]]):
    import pandas as pd

    rows = [_row(label, iv) for label, items in engines for iv in items]
    pos_n = max((sum(1 for k in r if k.startswith(POS_PREFIX)) for r in rows), default=0)
    df = pd.DataFrame(rows, columns=columns(pos_n)) if rows else pd.DataFrame(columns=columns(0))
    if len(df):
        df = df.sort_values(["t", "source", "engine", "line"], kind="stable", na_position="last")
    return normalise(df)


def csv_text(df) -> str:
    """CSV a spreadsheet opens without running anything: text cells (file names, engine labels, anything a
    log supplied) that start like a formula (``=``, ``+``, ``-``, ``@``, TAB, CR) get a leading quote."""
    from pandas.api.types import is_numeric_dtype

    from specdiag.sanitize import csv_cell

    out = df.copy()
    for c in out.columns:
        if not is_numeric_dtype(out[c].dtype):  # object or string dtype (pandas 3 infers "str")
            out[c] = out[c].map(csv_cell, na_action="ignore")
    return out.to_csv(index=False)


def write_frame(df, fmt: str, path: str | None):
    """Write ``df`` as csv | json | parquet to ``path`` (``None`` = return text for csv/json)."""
    from specdiag.outfile import write_output

    if fmt == "csv":
        text = csv_text(df)
        if path is None:
            return text
        write_output(path, text)
        return None
    if fmt == "json":
        text = json.dumps({"schema": "specdiag.metrics/1", "columns": list(df.columns),
                           "rows": json.loads(df.to_json(orient="values", double_precision=15))}, indent=None)
        if path is None:
            return text + "\n"
        write_output(path, text + "\n")
        return None
    if fmt == "parquet":
        if path is None:
            raise ValueError("parquet needs -o FILE")
        try:
            import pyarrow  # noqa: F401
        except ImportError as e:
            raise ValueError("parquet output needs pyarrow: pip install pyarrow") from e
        df.to_parquet(path, index=False)
        return None
    raise ValueError(f"unknown format {fmt!r}")


def read_frame(path: str, fmt: str | None = None):
    """Reload what ``write_frame`` wrote (format from ``fmt`` or the file extension)."""
    import pandas as pd

    fmt = fmt or path.rsplit(".", 1)[-1].lower()
    if fmt == "csv":
        df = pd.read_csv(path, dtype={c: str for c in TEXT_COLS}, keep_default_na=True)
    elif fmt == "json":
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        df = pd.DataFrame(data["rows"], columns=data["columns"])
    elif fmt == "parquet":
        df = pd.read_parquet(path)
    else:
        raise ValueError(f"unknown format {fmt!r}")
    return normalise(df)

#: one row of the interval table (used by the events store as well)
interval_row = _row

"""python tools/settled_by.py results/runs.csv: how many technique rows a bench had decided, minute by minute.

The bench summarized again from the runs finished by each minute of its wall time (a run counts from its start,
time_utc, plus its wall_s), as `python -m bench --summarize` would have then: the rows compared with the baseline
(not the ceilings, not the baseline against itself) whose answer was faster, slower or within the margin (--margin,
the bench's default unless given), out of those that had run, and the answer of the baseline against itself. With
--minutes M, the count at M minutes alone. The share of the runs' time inside their windows is printed too.

    python tools/settled_by.py results/runs.csv                # a line a minute
    python tools/settled_by.py results/runs.csv --minutes 12   # at 12 minutes
    python tools/settled_by.py results/runs.csv --margin 0.03  # read by the narrow margin
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the bench package, beside tools/
from bench.catalogue import SELF  # noqa: E402
from bench.stages.records import record
from bench.stages.statistics import (
    rules,
    summarize,  # noqa: E402
)


def finished_by(runs):
    """Each run's end, in minutes from the bench's first start."""
    start = pd.to_datetime(runs["time_utc"], utc=True)
    end = start + pd.to_timedelta(runs["wall_s"].fillna(0), unit="s")
    return (end - start.min()).dt.total_seconds() / 60


def settled_at(runs, minutes, margin=rules.MARGIN):
    """(rows decided, rows compared, the baseline against itself's answer or None) from the runs finished by
    `minutes`."""
    done = runs[finished_by(runs) <= minutes]
    if done.empty:
        return 0, 0, None
    summary = summarize.summarize(done.drop_duplicates("run", keep="last"), margin)
    if "speed_answer" not in summary:  # the baseline alone so far
        return 0, 0, None
    compared = summary[summary["speed_answer"].notna() & (summary["dataset"] != "synthetic")]
    compared = compared[compared["kind"] == "train"]
    itself = compared.loc[compared["variant"] == SELF, "speed_answer"]
    compared = compared[compared["variant"] != SELF]
    answer = WORDS.get(itself.iloc[0], itself.iloc[0]) if not itself.empty else None
    return int((compared["speed_answer"] != "unsettled").sum()), len(compared), answer


WORDS = {"same": "within the margin", "unsettled": "open"}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python tools/settled_by.py", description=__doc__.splitlines()[0])
    p.add_argument("runs", help="a bench's runs.csv")
    p.add_argument("--minutes", type=float, default=None, help="the count at this many minutes alone")
    p.add_argument("--bench", default=None, help="the bench id (default: the last in the file)")
    p.add_argument("--margin", type=float, default=rules.MARGIN, help="the margin the answers are read against")
    args = p.parse_args(argv)
    runs = record.read_runs(args.runs)
    runs = runs[runs["bench_id"] == (args.bench or runs["bench_id"].iloc[-1])]
    total = finished_by(runs).max()
    inside = runs["window_s"].fillna(0).sum() / runs["wall_s"].fillna(0).sum()
    marks = [args.minutes] if args.minutes is not None else [m for m in range(1, int(total) + 2)]
    for minutes in marks:
        settled, compared, itself = settled_at(runs, minutes, args.margin)
        said = f"; the baseline against itself: {itself}" if itself else ""
        print(f"{minutes:g} min: {settled} of {compared} rows decided{said}")
    print(f"the bench's runs took {total:.1f} min, {inside:.0%} of their time inside their windows ({len(runs)} runs)")


if __name__ == "__main__":
    main()

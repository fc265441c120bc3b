"""tools/settled_by.py: the rows a bench had decided by each minute, from its runs.csv."""

import math
import random

import pandas as pd
import settled_by

from bench.catalogue import SELF
from bench.stages.records import record


def runs(rounds=4, itself=False):
    """A bench of 3 rows a round, a minute a run: faster (1.5x, steady) settles by its second round, noisy never; with
    itself, the baseline against itself (steady) too."""
    rng, rows, minute = random.Random(0), [], 0
    arms = [("baseline", 1.0, 0.01), ("fast", 1.5, 0.01), ("noisy", 1.0, 0.4)]
    arms += [(SELF, 1.0, 0.01)] if itself else []
    for r in range(1, rounds + 1):
        for variant, effect, noise in arms:
            rows.append(dict(bench_id="b1", run=f"{variant}-{r}", variant=variant, kind="train", workload="small",
                             repeat=r, status="ok", samples_per_s=100 * effect * math.exp(rng.gauss(0, noise)),
                             time_utc=f"2026-11-29T00:{minute:02d}:00+00:00", wall_s=60.0, window_s=30.0,
                             dataset="generated", busy=False))  # fmt: skip
            minute += 1
    found = pd.DataFrame(rows)
    return found.reindex(columns=list(dict.fromkeys(record.RUN_COLUMNS + list(found))))


def test_the_rows_settled_grow_as_the_rounds_finish():
    found = runs()
    assert settled_by.settled_at(found, 2) == (0, 1, None)  # fast's first run: one row compared, no interval
    assert settled_by.settled_at(found, 5) == (1, 2, None)  # two rounds: fast decided, noisy not
    assert settled_by.settled_at(found, 12) == (1, 2, None)
    assert list(settled_by.finished_by(found))[:3] == [1.0, 2.0, 3.0]


def test_the_baseline_against_itself_is_not_a_row_decided_and_its_answer_is_said():
    found = runs(itself=True)
    assert settled_by.settled_at(found, 16) == (1, 2, "within the margin")
    assert settled_by.settled_at(found, 16, margin=0.0001)[2] == "open"


def test_it_prints_a_line_a_minute(tmp_path, capsys):
    runs().to_csv(tmp_path / "runs.csv", index=False)
    settled_by.main([str(tmp_path / "runs.csv"), "--minutes", "6"])
    said = capsys.readouterr().out
    assert "6 min: 1 of 2 rows decided" in said and "50% of their time inside their windows (12 runs)" in said

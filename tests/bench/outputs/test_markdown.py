"""bench/outputs/markdown.py: the tables say which runs diverged."""

import pandas as pd

from bench.modes import speed
from bench.outputs import markdown
from bench.stages.records import record
from helpers import ROW

ROW.update(dataset="generated", image_size=16, steps_timed=5, global_batch_size=16, model="m")


def test_the_tables_say_which_runs_diverged():
    rows = [dict(ROW, run=f"baseline-{i}", variant="baseline", samples_per_s=10.0 + i) for i in (1, 2)]
    rows += [dict(ROW, run="amp-1", variant="amp", samples_per_s=20.0, diverged_step=3)]
    rows += [dict(ROW, run="amp-2", variant="amp", samples_per_s=21.0)]
    summary = speed.summary_of(pd.DataFrame(rows).reindex(columns=record.RUN_COLUMNS))
    assert summary.set_index("variant")["runs_diverged"].to_dict() == {"baseline": 0, "amp": 1}
    text = markdown.markdown(summary, {"custom": "work"}, "now")
    assert "| amp (DIVERGED) |" in text and "| baseline |" in text
    assert "The loss diverged (NaN or inf) in 1 runs (amp)" in text

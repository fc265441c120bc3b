"""bench/outputs/plots.py: each run's curves gathered and the first round drawn."""

import json

from bench.outputs import plots
from helpers import fake_bench


def test_the_bench_gathers_each_runs_curves_and_draws_the_first_round(tmp_path, capsys):
    runs = fake_bench(tmp_path)
    (tmp_path / "logs" / "b1" / "amp-2.json").write_text("{torn")  # a run whose metrics cannot be read: left out
    found = plots.gather_curves(tmp_path, "b1", runs)
    assert sorted(found) == ["amp-1", "baseline-1", "baseline-2"]
    said = capsys.readouterr().err  # and named, once, whoever reads it next (the profiles do)
    assert f"warning: {tmp_path}/logs/b1/amp-2.json does not read (" in said
    assert "run amp-2's curve and profile are left out" in said
    plots.gather_curves(tmp_path, "b1", runs)
    assert capsys.readouterr().err == ""
    assert json.loads((tmp_path / plots.FILE).read_text()) == dict(bench_id="b1", runs=found)
    assert {v: r["repeat"] for v, r in plots.first_rounds(found, "small").items()} == dict(baseline=1, amp=1)
    plots.plot_curves(found, tmp_path / "curves.png", {"small": "a machine"})
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

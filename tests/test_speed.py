"""bench/modes/speed.py: the bench's own mode; here, a later round's warm-up cut to what its row's earlier runs
needed."""

import types

from bench.modes import speed
from bench.stages import plan


def bench_with(rows):
    """A Bench's warm-up bookkeeping with its finished rows, no bench around it."""
    made = types.SimpleNamespace(recorded=lambda: rows)
    for name in ("warmed", "known_needs", "note_need"):
        setattr(made, name, getattr(speed.Bench, name).__get__(made))
    return made


def run_of(variant, repeat, warmup=20, steps=80):
    flags = {"--steps": str(steps), "--warmup-steps": str(warmup), "--eval-samples": "0"}
    return plan.Run(f"{variant}-{repeat}", variant, "train", repeat, 1, ["python", "train.py"], "imagenet", flags=flags)


def row(variant, need, status="ok"):
    return dict(kind="train", status=status, workload="imagenet", variant=variant, warmup_steady_steps=need)


def test_a_later_round_warms_up_as_long_as_its_rows_earlier_runs_needed():
    """The most its earlier runs needed, 2 at least, its timed steps the same (60 here); the plan's warm-up where one
    of them did not say or needed it all; the first round and the loader rows as planned."""
    bench = bench_with([row("amp", 4), row("amp", 6), row("baseline", 1), row("compile", float("nan")),
                        row("checkpoint", 25), row("dali", 3, status="failed")])  # fmt: skip
    cut = bench.warmed(run_of("amp", 3))
    assert (cut.flags["--warmup-steps"], cut.flags["--steps"]) == ("6", "66")
    assert bench.warmed(run_of("baseline", 2)).flags["--warmup-steps"] == "2"  # 2 at least
    for kept in run_of("compile", 2), run_of("checkpoint", 2), run_of("dali", 2), run_of("amp", 1), run_of("ddp", 2):
        assert bench.warmed(kept).flags == kept.flags  # not said, needed more, failed, the first round, none yet
    bench.note_need(row("ddp", 3))  # a row kept as it finishes counts at once
    assert bench.warmed(run_of("ddp", 2)).flags["--warmup-steps"] == "3"

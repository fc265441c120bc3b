"""bench/stages/planning/build.py: the rows in the order a user needs them, a combination a row of its own, the same
cores for every row, later rounds shuffled by the seed, every row of a round at its seed, dp left out of a CPU bench."""

import pytest

from bench import catalogue, cli
from bench.outputs import diffs
from bench.stages.planning import build, plan, planned


def test_rows_run_in_the_order_a_user_needs_them():
    every = list(catalogue.DEFAULT)
    one = build.ordered(every, 1)
    assert one[:3] == ["synthetic", "amp-synthetic", "baseline"] and one[-3:] == ["dp", "ddp", "fsdp"]
    assert one.index("amp") < one.index("channels_last") < one.index("compile") < one.index("all") < one.index("dali")
    two = build.ordered(every, 2)
    assert two[two.index("all") + 1 : two.index("all") + 4] == ["dp", "ddp", "fsdp"] and two[-2:] == [
        "checkpoint",
        catalogue.SELF,
    ]
    assert build.ordered(["ddp", "baseline", "amp"], 0) == ["baseline", "amp", "ddp"]


def test_the_bench_runs_a_combination_as_a_row_of_its_own():
    """all:SWITCH[:SWITCH...] is train_all.py with those blocks off: no torchrun for no-ddp, a flag for each other;
    it is compiled (its own cache), distributed and slowed by emulated bf16 only where its blocks say so."""
    assert catalogue.command("all:no-ddp:no-compile") == ["train_all.py", "--no-compile"]
    assert catalogue.command("all:no-amp") == [*catalogue.TORCHRUN, "train_all.py", "--amp-dtype", "none"]
    assert catalogue.command("all:no-channels-last") == [*catalogue.TORCHRUN, "train_all.py", "--no-channels-last"]
    assert catalogue.command("all") == catalogue.TRAIN["all"] and catalogue.combination("amp") == ()
    yes_no_yes_no = [True, False, True, False]
    assert [catalogue.distributed(v) for v in ("all", "all:no-ddp", "all:no-compile", "amp")] == yes_no_yes_no
    assert [catalogue.compiled(v) for v in ("all", "all:no-compile", "all:no-ddp", "baseline")] == yes_no_yes_no
    assert [catalogue.uses_amp(v) for v in ("all", "all:no-amp", "all:no-ddp", "compile")] == yes_no_yes_no
    asked = ["ddp", "all:no-ddp:no-compile", "baseline", "all", "all:no-compile"]
    assert build.ordered(asked, 0) == ["baseline", "all", "all:no-ddp:no-compile", "all:no-compile", "ddp"]
    run = build.training_run("all:no-ddp:no-compile", 1, path="data", info=dict(image_size=32, classes=range(10)),
                             chosen=planned.Work("m", 64, 30, 5, 10), gpu_count=0, nproc=2, workers=1, cores=2,
                             workload="small", cache="/tmp/c")  # fmt: skip
    assert run.processes == 1 and run.cmd[1:3] == ["train_all.py", "--no-compile"]
    assert "TORCHINDUCTOR_CACHE_DIR" not in run.env and run.env["OMP_NUM_THREADS"] == "2"
    assert diffs.technique("all:no-compile") == "all"


@pytest.mark.parametrize("cores", [2, 16])
def test_every_row_of_a_plan_uses_the_same_cores(cores, described, tmp_path):
    """processes x threads = the cores, for every row, DDP's torchrun rows included (torchrun would set 1)."""
    config = cli.parse_args(["--dry-run", "--out", str(tmp_path)])
    runs, _, _ = plan.make_plan(config, 0, cores)
    trained = [r for r in runs if r.kind == "train"]
    assert {r.variant for r in trained if r.processes == 2} == {"ddp", "all"}
    assert all(r.processes * int(r.env["OMP_NUM_THREADS"]) == cores for r in trained)
    assert all(int(r.env["OMP_NUM_THREADS"]) == cores for r in runs if r.kind == "loader")


def test_rounds_after_the_first_run_in_a_shuffled_order_the_seed_fixes(described, tmp_path):
    config = cli.parse_args(["--dry-run", "--out", str(tmp_path), "--repeats", "3", "--budget", "none"])
    runs, _, _ = plan.make_plan(config, 0, 2)
    order = {r: [run.variant for run in runs if run.repeat == r and run.kind == "train" and run.variant != "baseline"]
             for r in (1, 2, 3)}  # fmt: skip
    # no GPU: dp (a passthrough), nvjpeg and all-synthetic (where named) left out; a CNN's workload leaves the
    # transformers' techniques to theirs
    cpu = [v for v in catalogue.DEFAULT if catalogue.BY_NAME[v].on_cpu and v not in catalogue.TRANSFORMER_ONLY]
    assert order[1] == [v for v in build.ordered(cpu, 0) if v != "baseline"]
    assert sorted(order[2]) == sorted(order[1]) and order[2] != order[1] and order[3] != order[2]
    for r in 1, 2, 3:  # a CPU's round: the baseline first, after every other row, and last
        names = [run.name for run in runs if run.repeat == r and run.kind == "train"]
        variants = [run.variant for run in runs if run.repeat == r and run.kind == "train"]
        at = [i for i, v in enumerate(variants) if v == "baseline"]
        assert at[0] == 0 and at[-1] == len(variants) - 1 and max(b - a for a, b in zip(at, at[1:])) == 3, variants
        assert names[0] == f"baseline-{r}" and names[-1] == f"baseline-{r}.{len(at)}"
    again, _, _ = plan.make_plan(config, 0, 2)
    assert [r.name for r in again] == [r.name for r in runs]


def test_dp_is_left_out_of_a_cpu_bench_by_default_but_runs_where_asked_or_on_a_gpu(described, tmp_path):
    """Without a GPU DataParallel is a passthrough: the default bench leaves its row out (make check keeps it); named
    in --variants it runs, and on a GPU machine it is in by default."""

    def trained(argv, gpus):
        config = cli.parse_args(["--dry-run", "--out", str(tmp_path), "--repeats", "1", "--budget", "none", *argv])
        return {r.variant for r in plan.make_plan(config, gpus, 2)[0] if r.kind == "train"}

    assert "dp" not in trained([], 0) and {"baseline", "ddp", "amp"} <= trained([], 0)
    assert trained(["--variants", "baseline,dp"], 0) == {"baseline", "dp"}
    assert "dp" in trained(["--workload", "small"], 1)


def test_every_row_of_a_round_trains_at_the_rounds_seed(described, tmp_path):
    """Round r at --seed + r - 1, every row of it alike: the rows of a round are paired, the rounds differ as reruns
    at other seeds do (the learning check's spread: bench/stages/statistics/rules.py learning)."""
    config = cli.parse_args(["--dry-run", "--out", str(tmp_path), "--repeats", "3", "--budget", "none", "--seed", "7"])
    runs, _, _ = plan.make_plan(config, 0, 2)
    seeds = {}
    for one in runs:
        if one.kind == "train":
            seeds.setdefault(one.repeat, set()).add(one.flags["--seed"])
    assert seeds == {1: {"7"}, 2: {"8"}, 3: {"9"}}

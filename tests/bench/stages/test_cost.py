"""bench/stages/cost.py: each part of a run's estimate, the budget and the time limit in one place, the GPU plan from
saved runs."""

import ast
import json

import pandas as pd
import pytest

from bench.stages import cost
from bench.stages.planning import fit, plan, planned
from helpers import MODULES, run

RUN = dict(device="cuda", status="ok", kind="train", model="resnet50", global_batch_size=256, setup_s=0.5,
           step_time_p90_ms=101.0, val_samples=1000)  # fmt: skip


def saved_runs(*rows):
    return pd.DataFrame([dict(RUN, **row) for row in rows])


SIX = "baseline,amp,channels_last,compile,all:no-ddp:no-compile,checkpoint"


def dry_run(budget):
    args = ("--dry-run", "--gpus", 1, "--workload", "imagenet", "--budget", budget, "--repeats", 3, "--loaders", "none")
    result = run("-m", "bench", *args, "--variants", SIX)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def plan_args(variants):
    from bench import cli

    return cli.parse_args(["--workload", "imagenet", "--variants", variants, "--dry-run", "--gpus", "1"])


def test_each_part_of_a_run_is_the_median_of_its_rows_saved_runs():
    runs = saved_runs(
        dict(variant="baseline", gpu_name="H200", folder="b/one", other_s=9.5, first_step_s=8.0, warmup_s=12.5,
             eval_s=3.0, step_time_median_ms=100.0, command="train.py --warmup-steps 10 --steps 50"),
        dict(variant="baseline", gpu_name="H200", folder="b/two", other_s=11.5, first_step_s=10.0, warmup_s=14.5,
             eval_s=1.0, val_samples=250, step_time_median_ms=120.0, command="train.py --warmup-steps 10"),
        dict(variant="baseline", gpu_name="H100", folder="b/three", other_s=50.0, first_step_s=50.0, warmup_s=60.0,
             eval_s=9.0, step_time_median_ms=500.0, command="train.py --warmup-steps 10"),
    )  # fmt: skip
    s = cost.saved_costs(runs, "H200")[("resnet50", 256, "baseline")]
    assert (s.start_s, s.first_s, s.warm_step_s, s.step_s) == pytest.approx((11.0, 9.0, 0.5, 0.11))
    assert s.eval_s == pytest.approx(3.5)  # per 1,000 images: 3.0 for 1,000 and 1.0 for 250 (4.0)
    assert s.runs == 2 and s.where == "b/one (H200), b/two (H200)" and s.warmup == 10 and s.steady
    anywhere = cost.saved_costs(runs, "B200")[("resnet50", 256, "baseline")]  # a GPU with no saved run: every GPU's
    assert anywhere.runs == 3 and anywhere.first_s == pytest.approx(10.0)
    stalls = cost.saved_costs(runs.assign(step_time_p90_ms=200.0), "H200")[("resnet50", 256, "baseline")]
    assert not stalls.steady and s.needed is None  # runs that did not record their warm-up's steps
    told = cost.saved_costs(runs.assign(warmup_steady_steps=[3, 4, 9]), "H200")[("resnet50", 256, "baseline")]
    assert told.needed == 4
    assert s.later_first_s is None  # no later round saved
    rounds = cost.saved_costs(runs.assign(repeat=[1, 2, 1]), "H200")[("resnet50", 256, "baseline")]
    assert (rounds.first_s, rounds.later_first_s) == (8.0, 10.0)  # a first round's first step apart from a later's


def test_a_later_rounds_first_step_is_its_own_where_a_saved_run_measured_one():
    """A row's first round pays once what its later ones do not (the fourth GPU run: up to 22 s against 5-9 s) and a
    compiled row its cold compile; a later round's first step is the saved later rounds' where there are some,
    else the first's (a compiled row's from a warm cache: FIRST_WARM_COMPILE_S, assumed)."""
    s = cost.Saved(start_s=11, first_s=20, warm_step_s=0.5, eval_s=3.5, step_s=0.1, steady=True, warmup=10,
                   needed=None, runs=2, where="b/one (H200)", later_first_s=6.0)  # fmt: skip

    def a(variant, repeat):
        return planned.Run(f"{variant}-{repeat}", variant, "train", repeat, 1)

    assert cost.first_step_s(s, a("baseline", 1)) == 20 and cost.first_step_s(s, a("baseline", 2)) == 6.0
    assert cost.first_step_s(s, a("compile", 3)) == 6.0
    unknown = cost.Saved(**{**s.__dict__, "later_first_s": None})
    assert cost.first_step_s(unknown, a("baseline", 2)) == 20
    assert cost.first_step_s(unknown, a("compile", 2)) == cost.FIRST_WARM_COMPILE_S
    assert cost.first_step_s(unknown, a("all:no-compile", 2)) == 20  # a combination that does not compile


def test_a_runs_estimate_adds_its_parts_as_its_command_asks():
    s = cost.Saved(start_s=11, first_s=60, warm_step_s=0.5, eval_s=3.5, step_s=0.1, steady=True, warmup=10,
                   needed=None, runs=1, where="b/one (H200)")  # fmt: skip
    first = planned.Run("compile-1", "compile", "train", 1, 1, flags={"--steps": "60", "--warmup-steps": "10",
                                                                    "--eval-samples": "1000"})  # fmt: skip
    assert cost.saved_run_s(first, s) == pytest.approx(11 + 60 + 0.5 * 9 + 0.1 * 50 + 3.5)
    later = planned.Run("compile-2", "compile", "train", 2, 1, flags={**first.flags, "--eval-samples": "0"})
    assert cost.saved_run_s(later, s) == pytest.approx(11 + cost.FIRST_WARM_COMPILE_S + 0.5 * 9 + 0.1 * 50)
    eager = planned.Run("amp-2", "amp", "train", 2, 1, flags={**first.flags, "--eval-samples": "500"})
    assert cost.saved_run_s(eager, s) == pytest.approx(11 + 60 + 0.5 * 9 + 0.1 * 50 + 3.5 / 2)


@pytest.mark.slow
def test_a_gpu_plan_from_the_saved_runs_keeps_its_rounds_and_says_what_it_assumed():
    """The six imagenet rows (the GPU command's work): their steps from the saved runs' step times (no calibration
    run), 3 paired rounds of the rows that fit by the saved costs (the data's generation included where data/ has
    none yet), the rows that do not left out and named, and every estimate's source said: a saved run (the fourth
    GPU run's later rounds measured compile's first step from a warm cache: nothing is assumed) or assumed."""
    lines = dry_run(16)
    (estimate,) = [line for line in lines if line.startswith("estimate: ")]
    assert " for 18 runs in 3 round(s) (budget 16 min)" in estimate and float(estimate.split()[1]) <= 16
    assert "steps auto" not in lines[0] and ", steps " in lines[0]  # from the saved step times
    (saved,) = [line for line in lines if line.strip().startswith("from saved runs: ")]
    assert "imagenet baseline: " in saved and "baseline/h200-third-run-imagenet (NVIDIA H200)" in saved
    assert "imagenet compile: " in saved and "baseline/h200-fourth-run-imagenet (NVIDIA H200)" in saved
    assert not [line for line in lines if line.strip().startswith("assumed: ")]  # compile's warm cache measured too
    lines = dry_run(9)
    (estimate,) = [line for line in lines if line.startswith("estimate: ")]
    assert " in 3 round(s) (budget 9 min)" in estimate and float(estimate.split()[1]) <= 9
    (left,) = [line for line in lines if "left out to fit the budget" in line]
    kept = [line.split()[1] for line in lines if line.startswith("/") and " train" in line]
    assert kept[:2] == ["train.py", "train_amp.py"] and len(kept) % 3 == 0
    assert all(v in left for v in SIX.split(",")[len(kept) // 3 :])


def test_the_warm_up_a_run_needed_is_read_from_its_warm_up_steps():
    """The fewest warm-up steps after which every later one (the last, which counts the FLOPs, left out) took 1.1x the
    window's median step or less."""
    from bench.stages.statistics.rules import steady_after

    assert steady_after([3000, 400, 120, 110, 105, 900], 100) == 4  # 3 unsteady steps, then the counting step
    assert steady_after([3000, 105, 100, 900], 100) == 2
    assert steady_after([3000, 400, 900], 100) is None  # none steady before the last
    assert steady_after([3000], 100) is None and steady_after([], 100) is None and steady_after(None, 100) is None
    assert steady_after([3000, 111, 900], 100) is None and steady_after([3000, 110, 900], 100) == 2


def test_a_gpu_plan_warms_up_as_long_as_its_saved_runs_needed(monkeypatch):
    """Saved runs that recorded their warm-up's steps set the next plan's warm-up to the most any row needed (2 at
    least: a compiled first step, then the FLOP count), never more than the workload's own."""
    rows = [dict(variant=v, gpu_name="H200", folder="b/one", other_s=10.0, first_step_s=8.0, warmup_s=12.5,
                 eval_s=3.0, step_time_median_ms=ms, command="train.py --warmup-steps 10", warmup_steady_steps=need)
            for v, ms, need in (("baseline", 120.0, 3), ("amp", 100.0, 5))]  # fmt: skip
    saved = cost.saved_costs(saved_runs(*rows), "H200")
    args = plan_args("baseline,amp")
    works = {"imagenet": plan.work(args, 1, "imagenet")}
    assert fit.known_costs(works, 1, ["baseline", "amp"], saved)["imagenet"].warmup_steps == 5
    saved = cost.saved_costs(saved_runs(*[dict(r, warmup_steady_steps=1) for r in rows]), "H200")
    assert fit.known_costs(works, 1, ["baseline", "amp"], saved)["imagenet"].warmup_steps == 2


def test_data_not_made_yet_is_in_the_estimate_and_the_budget(monkeypatch, tmp_path):
    """A generated workload whose folder is missing is made before the first run: its time (the measured rates per
    core) is in the estimate and counts against the budget; a folder made with the same parameters costs nothing."""
    from bench import data

    assert cost.data_s(data.WORKLOADS["imagenet"], 2) == pytest.approx(42_000 / (2 * cost.DATA_PER_CORE["photo"]))
    monkeypatch.setattr(plan, "ROOT", tmp_path)
    args = plan_args("baseline,amp")
    making = plan.to_generate(args, ["imagenet", "vit"], True, 16)
    assert list(making) == ["imagenet"] and making["imagenet"] == pytest.approx(42_000 / (16 * 115.0))
    assert plan.generating(making, 16) == [
        "the data, generated first: imagenet about 23 s on 16 cores (bench/stages/cost.py's measured rates)"
    ]
    folder = tmp_path / "data" / "imagenet"
    folder.mkdir(parents=True)
    (folder / "generated.json").write_text(json.dumps(data.parameters(seed=0, **data.WORKLOADS["imagenet"])))
    assert plan.to_generate(args, ["imagenet", "vit"], True, 16) == {}


def test_the_budget_becomes_seconds_in_one_place():
    from bench.stages import cost

    assert cost.budget_s("none", True) is None and cost.budget_s(None) is None  # no budget; a plan's own, fitted
    assert cost.budget_s(None, True) == 60 * cost.BUDGET_MIN["gpu"] and cost.budget_s(None, False) == 60 * 25
    assert cost.budget_s(2.5, False) == 150 and cost.budget_s(2.5) == 150
    sources = "".join(path.read_text() for path in MODULES.values())
    assert sources.count("60 * (args.budget") == 0 and sources.count("60 * args.budget") == 0


def test_a_runs_time_limit_is_chosen_in_one_place():
    """--timeout, else the mode's default on this kind of machine: bench/stages/cost.py's timeout_s, for every mode."""
    from bench.stages import cost

    assert cost.timeout_s(None, 1) == 900 and cost.timeout_s(None, 0) == 600 and cost.timeout_s(77, 1, "check") == 77
    assert cost.timeout_s(None, 0, "to_accuracy") == 6 * 3600 and cost.timeout_s(None, 2, "check") == 600
    sources = {m: p.read_text() for m, p in MODULES.items() if m != "bench.stages.cost"}
    assert [m for m, text in sources.items() if "args.timeout or" in text or "TIMEOUT_S" in text] == []


def test_a_runs_estimate_reads_its_row_from_the_run_and_its_costs_from_here():
    """A compile cold in its row's first round, warm after and warm over another loader's (its row's cache), none
    where a combination switches it off; a window at its row's factor, emulated bf16's 6x on a CPU without it.
    cost.py asks the run, never the catalogue (one place knows the rows, one the seconds)."""
    cpu = cost.COST_S["cpu"]

    def a(variant, repeat=1, workload="small"):
        return planned.Run(f"{variant}-{repeat}", variant, "train", repeat, 1, workload=workload)

    assert (
        cost.compile_s(a("compile"), gpu=False) == cpu["cold"] and cost.compile_s(a("compile", 2), False) == cpu["warm"]
    )
    assert cost.compile_s(a("all:no-ddp+nvjpeg"), False) == cpu["warm"] and cost.compile_s(a("all:no-compile"), 0) == 0
    assert cost.compile_s(a("compile", 3), False, repeat=1) == cpu["cold"]  # a mode's probe: a new cache each
    assert cost.run_s(a("compile"), 6.0, False) == cpu["fixed"] + 6.0 + cpu["cold"]
    assert cost.window_s(a("checkpoint"), 10.0, False) == 13.0 and cost.window_s(a("checkpoint"), 10.0, True) == 16
    assert cost.window_s(a("checkpoint", workload="vit"), 10.0, True) == 65.0
    assert cost.window_s(a("amp"), 10.0, False, bf16_native=False) == 10 * cost.EMULATED_BF16
    assert cost.window_s(a("all:no-amp"), 10.0, False, bf16_native=False) == 10  # no autocast: no emulation
    tree = ast.parse(MODULES["bench.stages.cost"].read_text())
    imported = {
        f"{node.module}.{a.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names
    }
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not [name for name in imported if "catalogue" in name], imported

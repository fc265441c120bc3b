"""bench/stages/plan.py: the rows in the order a user needs them, whole rounds in the budget, the same cores for every
row, bad data and models found before the first run, the plan itself pure (prepare and calibrate before it)."""

import builtins
import dataclasses
import importlib
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from bench import catalogue, cli
from bench import data as bench_data
from bench.outputs import diffs
from bench.stages import cost, plan, record
from helpers import CPU_CLASSES, ROOT, TINY, VIT, dry_run, fast_first, join_stubbed, run


def planned_runs(variants, repeats, workloads=("small",), estimate=10.0):
    return [
        plan.Run(f"{w}-{v}-{r}", v, "train", r, 1, workload=w, estimate_s=estimate)
        for r in range(1, repeats + 1)
        for w in workloads
        for v in variants
    ]


@pytest.mark.slow
def test_the_plan_itself_launches_writes_and_imports_nothing_and_is_the_same_twice(tiny_data, tmp_path, monkeypatch):
    """make_plan's steps: asked, prepare (the data read, by the scripts' loader), calibrated (the caller's function
    launches), then plan: with every way to launch, write or import refused, it plans, twice the same."""
    flags = ["--data", str(tiny_data), "--variants", "baseline,amp", "--loaders", "loader", "--steps", "auto"]
    config = cli.parse_args([*flags, "--out", str(tmp_path)])
    ask = plan.asked(config, 0, 2)
    found = plan.prepare(config, 0, ask.names)
    steps = plan.calibrated(config, 0, 2, ask, found, calibrate=lambda *given: 17)
    assert steps == {"custom": (found["custom"][0].warmup_steps, 17)}

    def refuse(*given, **named):
        raise AssertionError("the plan launched, wrote or imported something")

    for module, name in [
        (subprocess, "run"),
        (subprocess, "Popen"),
        (os, "makedirs"),
        (os, "replace"),
        (os, "remove"),
        (plan, "describe"),
        (plan, "check_model"),
        (plan, "folder"),
        (bench_data, "ensure"),
        (importlib, "import_module"),
        (builtins, "open"),
        (builtins, "__import__"),
    ]:  # fmt: skip  (__import__ last: setattr itself imports)
        monkeypatch.setattr(module, name, refuse)
    try:
        first = plan.plan(config, 0, 2, ask, found, steps, tmp_path / "logs")
        second = plan.plan(config, 0, 2, ask, found, steps, tmp_path / "logs")
    finally:
        monkeypatch.undo()
    assert not (tmp_path / "logs").exists()
    runs, works, fit = first
    assert [r.cmd for r in runs] == [r.cmd for r in second[0]] and works == second[1]
    assert dataclasses.asdict(fit) == dataclasses.asdict(second[2])
    assert works["custom"].steps == 17 and found["custom"][0].steps == "auto"  # a new Work: its inputs as they were
    assert {r.variant for r in runs} >= {"baseline", "amp", "loader"} and all("17" in r.cmd for r in runs[:1])


def test_bad_data_is_found_before_the_first_run(tiny_data, tmp_path):
    data = tmp_path / "data"
    (data / "train" / "a").mkdir(parents=True)
    result = run("-m", "bench", "--data", data, "--out", tmp_path / "out")
    assert result.returncode == 2 and "the data cannot be used" in result.stderr and "val" in result.stderr
    assert not (tmp_path / "out" / "runs.csv").exists()


def test_rows_run_in_the_order_a_user_needs_them():
    every = list(catalogue.DEFAULT)
    one = plan.ordered(every, 1)
    assert one[:3] == ["synthetic", "amp-synthetic", "baseline"] and one[-3:] == ["dp", "ddp", "fsdp"]
    assert one.index("amp") < one.index("channels_last") < one.index("compile") < one.index("all") < one.index("dali")
    two = plan.ordered(every, 2)
    assert two[two.index("all") + 1 : two.index("all") + 4] == ["dp", "ddp", "fsdp"] and two[-1] == "checkpoint"
    assert plan.ordered(["ddp", "baseline", "amp"], 0) == ["baseline", "amp", "ddp"]


def test_the_budget_keeps_whole_rounds_then_leaves_rows_out_from_the_end():
    runs = planned_runs(["baseline", "amp", "dp"], 3, ("small", "imagenet"))  # 60 s a round of both workloads
    kept, left_out = plan.fit_budget(runs, 130, 5)
    assert [r.repeat for r in kept] == [1] * 6 + [2] * 6 and left_out == []
    kept, left_out = plan.fit_budget(runs, 45, 0)  # not even one round: dp goes, then nothing else need
    assert {r.variant for r in kept} == {"baseline", "amp"} and left_out == ["dp"] and {r.repeat for r in kept} == {1}
    assert plan.fit_budget(runs, None, 0) == (runs, [])
    # rounds before rows where rounds are wanted: 3 rounds of the baseline and amp rather than 2 of all three
    kept, left_out = plan.fit_budget(runs, 130, 5, wanted=3)
    assert (
        {r.variant for r in kept} == {"baseline", "amp"}
        and left_out == ["dp"]
        and {r.repeat for r in kept} == {1, 2, 3}
    )
    kept, left_out = plan.fit_budget(runs, 45, 0, wanted=3)  # two training rows kept at least, then one round
    assert {r.variant for r in kept} == {"baseline", "amp"} and left_out == ["dp"] and {r.repeat for r in kept} == {1}
    groups = plan.rounds(runs)
    assert len(groups) == 6 and [(g[0].repeat, g[0].workload) for g in groups[:2]] == [(1, "small"), (1, "imagenet")]


def test_the_window_shrinks_to_fit_the_settling_rounds_but_never_below_its_floor():
    """The rounds asked, up to plan.SETTLING_ROUNDS (3): the window 11 minutes leave 2 rounds of these rows is at its
    floor for 3, and 15 minutes give 3 a window between."""
    args = (["baseline", "amp", "compile"], ["loader"], ["small", "imagenet"], 3, True, True)
    assert plan.fit_window(None, *args) == cost.WINDOW_S
    assert plan.fit_window(10**6, *args) == cost.WINDOW_S
    assert plan.fit_window(60, *args) == cost.WINDOW_MIN_S
    assert plan.fit_window(11 * 60, *args) == cost.WINDOW_MIN_S
    assert cost.WINDOW_MIN_S < plan.fit_window(15 * 60, *args) < cost.WINDOW_S
    two = (*args[:3], 2, *args[4:])
    assert cost.WINDOW_MIN_S < plan.fit_window(11 * 60, *two) < cost.WINDOW_S
    assert plan.fit_window(60, *args[:-2], False, True) == cost.WINDOW_S  # a CPU's steps are fixed


@pytest.mark.slow
def test_the_gpu_plan_fits_its_35_minutes_in_rounds_of_a_device_command():
    """The default plan of one GPU, both workloads: two rounds within its 35 min by its own estimate (the saved GPU
    runs' costs), each workload's round within a device command's 10 minutes (imagenet's 13 rows take about 9.5 by
    the saved runs: a part of --chunk 9 splits such a round between its runs)."""
    result = run("-m", "bench", "--dry-run", "--gpus", 1)
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("estimate: ")]
    minutes = float(line.split()[1])
    assert minutes <= 35 and "(budget 35 min)" in line, line
    longest = float(line.split("about ")[1].split(" min")[0])
    assert longest <= 10, line
    assert "2 round(s)" in line or "3 round(s)" in line, line
    commands = [c for c in result.stdout.splitlines() if c.startswith(sys.executable)]
    assert commands[0].split()[1] == "train.py" and "synthetic" in commands[0]
    assert all("--no-data-check" in c for c in commands)


@pytest.mark.slow
def test_make_compare_on_a_gpu_runs_one_workload_with_room_for_3_rounds():
    """Every technique against the baseline as make compare runs it where a GPU is: the one workload its technique
    belongs to (the transformer's for fsdp, fused, tf32), and 3 whole rounds inside its budget by the GPU plan's own
    estimate (a 5-minute compare of both workloads planned one round, no interval). The default bench: both."""
    makefile = (ROOT / "Makefile").read_text()
    minutes = re.search(r"^COMPARE_MIN = \$\(if \$\(shell nvidia-smi -L 2>/dev/null\),(\d+),5\)$", makefile, re.M)[1]
    for technique in sorted(set(catalogue.TRAIN) - {"baseline", "synthetic"}):
        args = ("--variants", f"baseline,{technique}", "--loaders", "none", "--budget", minutes, "--repeats", 3)
        result = run("-m", "bench", *args, "--dry-run", "--gpus", 1)
        assert result.returncode == 0, result.stderr
        workloads = [line.split(":")[0] for line in result.stdout.splitlines() if line.startswith("# ")]
        expected = ["# vit" if technique in catalogue.TRANSFORMER_ONLY else "# imagenet"]
        assert workloads == expected, (technique, workloads)
        (line,) = [line for line in result.stdout.splitlines() if line.startswith("estimate: ")]
        assert " in 3 round(s) (budget " in line and f"(budget {minutes} min)" in line, (technique, line)
    default = run("-m", "bench", "--dry-run", "--gpus", 1).stdout
    assert [line.split(":")[0] for line in default.splitlines() if line.startswith("# ")] == ["# imagenet", "# vit"]


def test_a_short_budget_keeps_fewer_rounds_and_says_so(in_process_bench, monkeypatch, capsys):
    """Planning, not the runs (its runs made up, in-process): 30 s by the plan's estimate (a CPU with native bf16,
    whatever this one is: amp's row 6x longer where emulated) keeps 1 round of the baseline and amp of the 3 asked,
    and leaves dp out."""
    monkeypatch.setenv("CPUINFO_FLAGS", CPU_CLASSES["bf16"])
    flags = [*map(str, TINY), "--variants", "baseline,amp,dp", "--loaders", "none", "--repeats", "3"]
    code, launched = in_process_bench("bench", "--budget", "0.5", flags=flags)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "of the 3 asked" in out and "left out to fit the budget: dp" in out
    assert launched == ["baseline-1", "amp-1"]
    rows = record.read_runs(in_process_bench.out / "runs.csv")
    assert set(rows["repeat"]) == {1} and set(rows["variant"]) == {"baseline", "amp"}


@pytest.mark.slow
def test_every_file_is_checked_once_per_bench_not_per_run(tiny_data, tmp_path):
    """A run of the bench skips the check (--no-data-check) because the bench's own look at the folder did it:
    damage is found before the first run (test_bench.py), and a script alone still checks."""
    data, image = tmp_path / "data", next((tiny_data / "train").glob("*/*.jpg")).read_bytes()
    for split, count in ("train", 30), ("val", 2):
        for cls in "a", "b":
            (data / split / cls).mkdir(parents=True)
            for i in range(count):
                (data / split / cls / f"{i:02d}.jpg").write_bytes(image)
    (data / "train" / "a" / "01.jpg").write_bytes(b"\xff\xd8\xff\xe0 cut short")  # not among the sizes sampled
    checked = run("loader.py", "--data", data)
    assert checked.returncode == 2 and "01.jpg" in checked.stderr
    trusted = run("loader.py", "--data", data, "--no-data-check")
    assert trusted.returncode == 0, trusted.stderr
    result = run("-m", "bench", "--data", data, "--out", tmp_path / "out", "--dry-run")
    assert result.returncode == 2 and "the data cannot be used" in result.stderr and "01.jpg" in result.stderr


@pytest.mark.parametrize("text", fast_first(["{not json", '{"bench_id": "x"}', "[]"]))
def test_a_damaged_plan_is_named_and_resume_stops(text, tmp_path):
    (tmp_path / "logs" / "b1").mkdir(parents=True)
    (tmp_path / "logs" / "b1" / "plan.json").write_text(text)
    result = run("-m", "bench", "--resume", "--out", tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "plan.json is damaged" in result.stderr and "--summarize still reads" in result.stderr


@pytest.mark.parametrize("name", ["train_ddp", "train_all"])
@pytest.mark.parametrize("local_rank,local_world_size,gpus", [(1, 2, 1), (0, 3, 2), (5, 8, 4)])
def test_more_ddp_processes_than_gpus_is_one_line(
    tiny_data, monkeypatch, capsys, name, local_rank, local_world_size, gpus
):
    """Two processes on one GPU make NCCL fail with a traceback ("Duplicate GPU detected"): every process of the
    machine says it in one line instead, before joining, naming --nproc-per-node and the GPUs there are."""
    script = importlib.import_module(name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(script.dist, "init_process_group", lambda *a, **k: pytest.fail("joined with too few GPUs"))
    env = dict(
        RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE="16", LOCAL_WORLD_SIZE=str(local_world_size)
    )
    monkeypatch.setattr(script.os, "environ", {**script.os.environ, **env})
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--data", str(tiny_data), "--batch-size", "16"])
    with pytest.raises(SystemExit) as exit:
        script.main()
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit.value.code == 2 and len(lines) == 1, lines
    assert f"{local_world_size} processes on this machine but {gpus} GPU(s)" in lines[0]
    assert f"--nproc-per-node {gpus} at most" in lines[0] and "--backend gloo" in lines[0]


@pytest.mark.parametrize(
    "local_rank,gpus,flags,expected",
    [(3, 4, (), 3), (1, 1, ("--backend", "gloo"), 0)],  # as many as the GPUs; gloo shares one GPU between two
    ids=["nccl, one GPU each", "gloo, two on one GPU"],
)
def test_ddp_processes_that_fit_join(tiny_data, monkeypatch, local_rank, gpus, flags, expected):
    calls = join_stubbed(monkeypatch, tiny_data, gpus, local_rank, max(gpus, local_rank + 1), *flags)
    assert calls["set_device"] == torch.device("cuda", expected)
    assert calls["backend"] == ("gloo" if flags else "nccl")


def test_a_run_carries_its_flags_and_an_older_plan_gets_them_from_its_command(tmp_path):
    """A run's command is built last from its script and flags: a mode's change to a flag replaces it (one
    --batch-size, one --steps in a probe of --max-batch), in its place. The modes read a run's global batch and model
    from the run (max_batch's search starts there, scaling's table says it), not back out of its command line; a plan
    saved before runs kept them still resumes, and a workload's work reads back as a typed record (plan.Work)
    whatever fields the plan that saved it had."""
    from dataclasses import asdict

    from bench.modes import max_batch
    from bench.stages import plan

    chosen = plan.Work(model="resnet18", batch_size=96, steps=10, warmup_steps=2, eval_samples=100)
    info = dict(image_size=32, classes=list("abcdefghij"))
    run = plan.training_run("amp", 1, "data/small", info, chosen, 0, 2, 0, 2, "small")
    assert (run.batch_size, run.model) == (96, "resnet18")
    probe = max_batch.probe_run(run, 384, 7, "amp-batch384", warmup=2)
    assert probe.cmd.count("--batch-size") == probe.cmd.count("--steps") == 1 and probe.batch_size == 384
    assert probe.cmd[probe.cmd.index("--batch-size") + 1] == "384"
    assert [p for p in probe.cmd if p.startswith("--")] == [p for p in run.cmd if p.startswith("--")]  # in place
    assert probe.cmd[probe.cmd.index("--steps") + 1 : probe.cmd.index("--steps") + 4] == ["7", "--warmup-steps", "2"]
    assert run.cmd[run.cmd.index("--batch-size") + 1] == "96"  # the plan's run is left as it was
    old = {k: v for k, v in asdict(run).items() if k not in ("batch_size", "model", "script", "flags")}
    old["cmd"] = run.cmd  # a plan saved before runs kept their flags apart: its whole command
    path = tmp_path / "plan.json"
    works = dict(small=dict(data="data/small", steps=10, timeout=60, a_field_of_a_newer_bench=1))
    path.write_text(json.dumps(dict(bench_id="b", machine_class="m", works=works, runs=[old])))
    saved, (again,) = plan.load(path)
    assert (again.batch_size, again.model, again.cmd) == (96, "resnet18", run.cmd)
    assert saved["works"]["small"] == plan.Work(steps=10, timeout=60, data="data/small")  # typed, the rest defaults


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
    assert plan.ordered(asked, 0) == ["baseline", "all", "all:no-ddp:no-compile", "all:no-compile", "ddp"]
    run = plan.training_run("all:no-ddp:no-compile", 1, "data", dict(image_size=32, classes=range(10)),
                            plan.Work("m", 64, 30, 5, 10), 0, 2, 1, 2,
                            "small", cache="/tmp/c")  # fmt: skip
    assert run.processes == 1 and run.cmd[1:3] == ["train_all.py", "--no-compile"]
    assert "TORCHINDUCTOR_CACHE_DIR" not in run.env and run.env["OMP_NUM_THREADS"] == "2"
    assert diffs.technique("all:no-compile") == "all"


@pytest.mark.parametrize("spec", fast_first(["{dir}/nosuch.py:build", "{dir}/bad.py:wrong_scores"]))
def test_the_bench_refuses_a_bad_model_before_the_first_run(models, tiny_data, tmp_path, spec):
    out = tmp_path / "results"
    result = run("-m", "bench", "--data", tiny_data, "--out", out, "--model", spec.format(dir=models))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("bench: error: the model cannot be used: ") and "Traceback" not in result.stderr
    assert not (out / "runs.csv").exists()


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
    assert order[1] == [v for v in plan.ordered(cpu, 0) if v != "baseline"]
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


@pytest.mark.usefixtures("described")
def test_the_vit_workload_runs_the_transformer_techniques_and_a_gpu_plan_keeps_its_budget(tmp_path):
    config = cli.parse_args(["--workload", "vit", "--dry-run", "--out", str(tmp_path)])
    runs, works, _ = plan.make_plan(config, 0, 2)
    rows = {r.variant for r in runs}
    assert rows == {"synthetic", "amp-synthetic", "baseline", "amp", "tf32", "fused", "compile", "all", "checkpoint",
                    "ddp", "fsdp"}  # fmt: skip
    assert all("--optimizer" in r.cmd and VIT in r.cmd for r in runs) and works["vit"].data.endswith("small")
    small, _, _ = plan.make_plan(cli.parse_args(["--dry-run", "--out", str(tmp_path)]), 0, 2)
    assert not {r.variant for r in small} & catalogue.TRANSFORMER_ONLY  # a CNN's default bench is as it was
    gpu, works, fit = plan.make_plan(cli.parse_args(["--dry-run", "--out", str(tmp_path)]), 1, 16)
    assert list(works) == ["imagenet", "vit"] and works["vit"].model == "vit_b_16"
    assert fit.rounds >= 2 and fit.total_s <= cost.BUDGET_MIN["gpu"] * 60 and not fit.left_out
    assert {r.variant for r in gpu if r.workload == "vit"} >= {"fsdp", "fused", "tf32", "ddp"}


@pytest.mark.slow
def test_the_gpu_plan_prints_from_any_machine():
    plan = dry_run("--workload", "imagenet", "--gpus", 1, "--repeats", 1)
    header, *lines = plan.strip().splitlines()
    commands = [line for line in lines if not line.startswith(("estimate: ", "  "))]
    assert "imagenet: resnet50" in header and "(224 px, 10 classes)" in header
    # the steps from the saved GPU runs' step times (baseline/), or calibrated on the machine where there are none
    saved = any(line.strip().startswith("from saved runs: imagenet") for line in lines)
    assert saved and ", steps " in header and "steps auto" not in header
    cnn = [v for v in catalogue.DEFAULT if v not in catalogue.TRANSFORMER_ONLY]  # a CNN's rows: fsdp, ... on vit's
    assert len(commands) == len(cnn) + len(catalogue.LOADERS)
    assert all("--device cuda" in c for c in commands if "--bench" not in c)
    assert any("--nproc-per-node 1 train_ddp.py" in c for c in commands)
    assert any("--nproc-per-node 1 train_all.py" in c for c in commands)
    assert any("--data synthetic:224:10" in c and "train_amp.py" in c for c in commands)
    assert all("--eval-samples 1000" in c for c in commands if "train" in c)
    none = dry_run("--workload", "imagenet", "--gpus", 1, "--repeats", 1, "--baseline-dir", "/nonexistent")
    assert "steps auto (calibrated on the machine before the first run)" in none.splitlines()[0]
    four = dry_run("--workload", "imagenet", "--gpus", 4, "--repeats", 1)
    assert "--nproc-per-node 4 train_ddp.py" in four
    both = dry_run("--gpus", 1, "--repeats", 2)  # a GPU's default: imagenet and vit, 2 repeats interleaved
    assert both.count("# imagenet: resnet50") == 1 and both.count("# vit: vit_b_16") == 1 and "# small" not in both
    assert both.count("train_dp.py") == 2 and both.count("train_fsdp.py") == 2  # dp on the CNN, fsdp on the ViT


@pytest.mark.slow
def test_the_cpu_plan_is_the_small_workload():
    plan = dry_run("--repeats", 1)
    assert plan.startswith("# small: shufflenet_v2_x0_5") and "global batch 64, steps 30" in plan
    assert "--eval-samples 500" in plan and "--data synthetic:32:10" in plan and "imagenet" not in plan


def test_every_row_of_a_round_trains_at_the_rounds_seed(described, tmp_path):
    """Round r at --seed + r - 1, every row of it alike: the rows of a round are paired, the rounds differ as reruns
    at other seeds do (the learning check's spread: bench/stages/summarize.py learning)."""
    config = cli.parse_args(["--dry-run", "--out", str(tmp_path), "--repeats", "3", "--budget", "none", "--seed", "7"])
    runs, _, _ = plan.make_plan(config, 0, 2)
    seeds = {}
    for planned in runs:
        if planned.kind == "train":
            seeds.setdefault(planned.repeat, set()).add(planned.flags["--seed"])
    assert seeds == {1: {"7"}, 2: {"8"}, 3: {"9"}}

"""bench/stages/planning/plan.py: the plan itself pure (prepare and calibrate before it, each a named step), the GPU
plan in its budget from any machine, the CPU plan the small workload, vit's rows, DDP's processes against the GPUs."""

import builtins
import dataclasses
import importlib
import os
import re
import subprocess
import sys

import pytest
import torch

from bench import catalogue, cli
from bench import data as bench_data
from bench.stages import cost
from bench.stages.planning import plan, prepare
from helpers import ROOT, VIT, dry_run, join_stubbed, run


@pytest.mark.slow
def test_the_plan_itself_launches_writes_and_imports_nothing_and_is_the_same_twice(tiny_data, tmp_path, monkeypatch):
    """make_plan's steps: asked, prepare (the data read, by the scripts' loader), calibrated (the caller's function
    launches), then plan: with every way to launch, write or import refused, it plans, twice the same."""
    flags = ["--data", str(tiny_data), "--variants", "baseline,amp", "--loaders", "loader", "--steps", "auto"]
    config = cli.parse_args([*flags, "--out", str(tmp_path)])
    ask = plan.asked(config, 0, 2)
    found = prepare.prepare(config, 0, ask.works)
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
        (prepare, "describe"),
        (prepare, "check_model"),
        (prepare, "folder"),
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
    runs, works, fitted = first
    assert [r.cmd for r in runs] == [r.cmd for r in second[0]] and works == second[1]
    assert dataclasses.asdict(fitted) == dataclasses.asdict(second[2])
    assert works["custom"].steps == 17 and found["custom"][0].steps == "auto"  # a new Work: its inputs as they were
    assert {r.variant for r in runs} >= {"baseline", "amp", "loader"} and all("17" in r.cmd for r in runs[:1])


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


@pytest.mark.usefixtures("described")
def test_the_vit_workload_runs_the_transformer_techniques_and_a_gpu_plan_keeps_its_budget(tmp_path):
    config = cli.parse_args(["--workload", "vit", "--dry-run", "--out", str(tmp_path)])
    runs, works, _ = plan.make_plan(config, 0, 2)
    rows = {r.variant for r in runs}
    assert rows == {
        "synthetic",
        "amp-synthetic",
        "baseline",
        "amp",
        "tf32",
        "fused",
        "compile",
        "all",
        "checkpoint",
        "ddp",
        "fsdp",
        catalogue.SELF,
    }  # fmt: skip (the baseline against itself: a CPU bench's)
    assert all("--optimizer" in r.cmd and VIT in r.cmd for r in runs) and works["vit"].data.endswith("small")
    small, _, _ = plan.make_plan(cli.parse_args(["--dry-run", "--out", str(tmp_path)]), 0, 2)
    assert not {r.variant for r in small} & catalogue.TRANSFORMER_ONLY  # a CNN's default bench is as it was
    gpu, works, fitted = plan.make_plan(cli.parse_args(["--dry-run", "--out", str(tmp_path)]), 1, 16)
    assert list(works) == ["imagenet", "vit"] and works["vit"].model == "vit_b_16"
    assert fitted.rounds >= 2 and fitted.total_s <= cost.BUDGET_MIN["gpu"] * 60 and not fitted.left_out
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
    # a CNN's rows (fsdp, ... on vit's), the GPU's (the baseline against itself is a CPU bench's)
    cnn = [v for v in catalogue.DEFAULT if v not in catalogue.TRANSFORMER_ONLY and catalogue.BY_NAME[v].on_gpu]
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

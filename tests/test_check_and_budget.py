"""python -m bench --check (does every path work here?), and a plan that fits its budget: priority order,
estimates, whole rounds, --chunk and --resume, the data checked once per bench, where a run's time goes."""

import gzip
import json
import pickle
import re
import sys
import types
from pathlib import Path

import pytest

from bench import BenchError, catalogue
from bench.modes import check
from bench.stages import cost, execute, plan, record
from helpers import CPU_CLASSES, ROOT, TINY_MODEL, run

sys.path.insert(0, str(ROOT))

TINY = ["--steps", 3, "--warmup-steps", 1, "--batch-size", 16, "--loader-steps", 3, "--workers", 1]


# ----------------------------------------------------------------------------- the check


@pytest.mark.slow
def test_make_check_passes_on_this_machine(tmp_path):
    """Every path that applies on a CPU runs and learns; the CUDA ones say why they do not apply; exit 0. With the
    tests' smallest model (--model: the check's own, smallnet, compiles for a minute on 2 cores, this one in seconds;
    each path's own tests train the real models)."""
    result = run("-m", "bench", "--check", "--model", TINY_MODEL, "--out", tmp_path, timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert out.startswith("CPU: ") and "features " in out and "GPU: none that torch can see" in out
    table = (tmp_path / "check" / "check.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith(("| path", "| ---"))]
    assert len(rows) == len(check.paths(0)) == 27
    works = [r for r in rows if "| works |" in r]
    not_here = [r for r in rows if "| does not apply | needs" in r]
    assert len(works) == 17 and len(not_here) == 10, table
    assert all("loss " in r or "delivered" in r for r in works)
    cuda = ("NCCL", "fp16", "reduce-overhead", "snapshot", "NVML", "TF32")
    assert all(any(word in r for word in cuda) for r in not_here)
    assert "check: 17 of 17 paths work here" in out
    assert "| train.py --profile: torch.profiler after the window (CPU) | works | " in table


@pytest.mark.slow
def test_the_check_on_a_gpu_machine_runs_every_cuda_path():
    """Planned for 2 GPUs: NCCL at 1 and 2 processes, fp16, reduce-overhead, the snapshot, NVML; and an estimate."""
    result = run("-m", "bench", "--check", "--dry-run", "--gpus", 2)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "check: 27 of 27 paths apply here, about" in out and "(as measured on an H100)" in out
    commands = [line for line in out.splitlines() if line.startswith("/") or line.startswith(sys.executable)]
    assert len(commands) == 27 and all("--device" in c for c in commands if "train_ddp.py" not in c or "gloo" in c)
    assert any("--nproc-per-node 1 train_ddp.py" in c and "--device cuda" in c for c in commands)
    assert any("--nproc-per-node 2 train_ddp.py" in c and "--device cuda" in c for c in commands)
    assert any("--amp-dtype fp16" in c for c in commands) and any("reduce-overhead" in c for c in commands)
    assert any("--memory-snapshot" in c for c in commands)
    one = run("-m", "bench", "--check", "--dry-run", "--gpus", 1).stdout
    assert "check: 25 of 27 paths apply here" in one  # 1 GPU: not NCCL over 2 processes (DDP, FSDP)


def row(**fields):
    base = dict(status="ok", error=None, samples_per_s=100.0, train_loss_first=2.3, train_loss_final=1.5)
    return {**base, **fields}


def test_a_path_works_only_if_it_ran_learned_and_did_what_it_says(tmp_path):
    amp = check.Probe("amp", ["train_amp.py"], expect=dict(amp_dtype="fp16", host_syncs_per_step=1))
    ok = row(amp_dtype="fp16", host_syncs_per_step=1)
    assert check.verdict(amp, ok, None) == ("works", "loss 2.30 -> 1.50, 100 samples/s")
    assert check.verdict(amp, row(status="failed", error="train_amp.py: error: out of memory"), None) == (
        "fails",
        "train_amp.py: error: out of memory",
    )
    assert check.verdict(amp, dict(ok, amp_dtype="bf16"), None)[1] == "its metrics say amp_dtype='bf16', not 'fp16'"
    result, why = check.verdict(amp, dict(ok, train_loss_final=2.4), None)
    assert result == "fails" and "does not learn: its loss went from 2.3 to 2.4" in why
    assert check.verdict(amp, dict(ok, train_loss_final=float("nan")), None)[0] == "fails"
    loader = check.Probe("loader", ["loader.py"], kind="loader")
    assert check.verdict(loader, dict(status="ok", samples_per_s=5000.0), None) == ("works", "5,000 images/s delivered")


def test_the_snapshot_and_nvml_paths_check_what_they_wrote_and_read(tmp_path):
    snapshot = check.Probe("snapshot", ["train.py"], kind="snapshot")
    path = tmp_path / "s.pickle"
    assert check.verdict(snapshot, row(), path)[0] == "fails"  # not written
    path.write_bytes(b"not a pickle")
    assert "does not load" in check.verdict(snapshot, row(), path)[1]
    path.write_bytes(pickle.dumps(dict(segments=[])))
    assert "holds no memory segment" in check.verdict(snapshot, row(), path)[1]
    path.write_bytes(pickle.dumps(dict(segments=[dict(total_size=2**21), dict(total_size=2**21)], device_traces=[])))
    assert check.verdict(snapshot, row(), path) == ("works", f"2 segments, 4 MiB; {path}")
    path.write_bytes(pickle.dumps(dict(segments=[dict(total_size=1, run=print)])))  # a function: code, refused
    assert "it names builtins.print, not plain data" in check.verdict(snapshot, row(), path)[1]
    nvml = check.Probe("nvml", ["train.py"], kind="nvml")
    assert check.verdict(nvml, row(nvml_peak_mib=None, nvml_method="unavailable: x"), None) == (
        "fails",
        "no GPU memory read: unavailable: x",
    )
    works = check.verdict(nvml, row(nvml_peak_mib=1500.0, nvml_method="process tree", gpu_sharing="alone"), None)
    assert works == ("works", "1,500 MiB (process tree), GPU sharing: alone")


def test_the_profile_and_energy_paths_check_what_they_wrote_and_read(tmp_path):
    profile = check.Probe("profile", ["train.py"], kind="profile")
    snapshot = tmp_path / "snapshot.pickle"
    assert "does not load" in check.verdict(profile, row(profile_steps=3), snapshot)[1]  # not written
    events = [{"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 1}, {"ph": "X", "cat": "kernel", "name": "k"}]
    Path(check.trace_of(snapshot)).write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    said = check.verdict(profile, row(profile_steps=3, device="cuda"), snapshot)[1]
    assert said.startswith("loss 2.30 -> 1.50") and said.endswith("a trace of 2 events, 1 steps, 1 kernels")
    assert "its metrics say 1 recorded" in check.verdict(profile, row(profile_steps=1), snapshot)[1]
    events.pop()
    Path(check.trace_of(snapshot)).write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    assert check.verdict(profile, row(profile_steps=3, device="cuda"), snapshot)[1].endswith("holds no CUDA kernel")
    energy = check.Probe("energy", ["train.py"], kind="energy")
    assert check.verdict(energy, row(energy_j=None, energy_source="unavailable: x"), None) == (
        "fails",
        "no energy read: unavailable: x",
    )
    works = check.verdict(energy, row(energy_j=90.0, avg_power_w=450.0, energy_per_1k_samples_j=12.5), None)
    assert works == ("works", "450 W over the window, 12.5 J per 1,000 samples")


def test_a_compiled_path_works_only_where_compiled_code_ran_in_the_window():
    """torch 2.11 once left a compiled model eager after the FLOP counter's step: the path then runs and learns,
    and the check must still fail it, naming why."""
    compiled = check.Probe("compile", ["train_compile.py"], expect=dict(compile_mode="default"), compiled=True)
    ran = row(compile_mode="default", compile_s=12.0, compile_cache_warm=False, compiled_steps_timed=17, steps_timed=17)
    assert check.verdict(compiled, ran, None) == (
        "works",
        "loss 2.30 -> 1.50, 100 samples/s, compiling 12 s (cold), compiled code in 17 of 17 timed steps",
    )
    eager = dict(ran, compiled_steps_timed=0)
    assert check.verdict(compiled, eager, None) == ("fails", "compiled code did not run in the timed window (0 steps)")
    plain = check.Probe("baseline", ["train.py"])
    assert check.verdict(plain, row(), None)[0] == "works"  # a path that does not compile is not asked


def test_the_check_runs_a_gpus_own_paths_first_and_paths_picks_by_name():
    every = check.paths(1)
    ordered = check.in_order(every, 1)
    first = [p.name for p in ordered[:10]]
    assert all(any(word in name for word in check.FIRST_ON_GPU) for name in first), first
    assert ordered[-1].name.startswith("loader.py") and check.in_order(every, 0) == every
    assert [p.name for p in check.chosen(every, ["dali"])] == [p.name for p in every if "DALI" in p.name] != []
    with pytest.raises(BenchError, match="--paths nope: no path's name holds these words"):
        check.chosen(every, ["nope"])


def test_the_check_exits_1_when_a_path_fails_and_0_when_all_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(check.data, "ensure", lambda *args, **kwargs: str(tmp_path / "data"))
    info = dict(gpu_count=0, cpu_model="X", cpu_cores=2, cpu_isa="avx2", cpu_bf16_native=False, machine_class="cpu-x")
    args = types.SimpleNamespace(out=tmp_path / "out", model=None, timeout=None, dry_run=False, gpus=None, budget=None,
                                 chunk=None)  # fmt: skip

    def launch(run, folder, timeout, stop, failing=(), **options):
        failed = any(f in run.cmd for f in failing)
        if "--profile" in run.cmd:  # a trace as torch.profiler writes one
            trace = {"traceEvents": [{"ph": "X", "name": f"ProfilerStep#{i}", "ts": i, "dur": 1} for i in (1, 2, 3)]}
            Path(run.cmd[run.cmd.index("--profile") + 1]).write_bytes(gzip.compress(json.dumps(trace).encode()))
        processes = int(run.cmd[run.cmd.index("--nproc-per-node") + 1]) if "--nproc-per-node" in run.cmd else 1
        return dict(row(), status="failed" if failed else "ok", error="boom" if failed else None, wall_s=1.0,
                    loader="dali", world_size=processes, amp_dtype="bf16", host_syncs_per_step=0,
                    memory_format="channels_last", compile_mode="default", compiled_steps_timed=17, steps_timed=17,
                    fused_step=True, optimizer="adamw",
                    dataset="synthetic" if "synthetic:32:10" in run.cmd else "generated", profile_steps=3,
                    device="cpu")  # fmt: skip

    monkeypatch.setattr(execute, "launch", lambda *a: launch(*a, failing=["train_checkpoint.py"]))
    with pytest.raises(SystemExit) as done:
        check.main(args, info, "b1")
    assert done.value.code == 1
    text = (tmp_path / "out" / "check" / "check.md").read_text()
    assert "| train_checkpoint.py | fails | boom |" in text
    assert "bf16 emulated (no AVX-512-BF16 or AMX)" in text
    monkeypatch.setattr(execute, "launch", lambda *a: launch(*a))
    check.main(args, info, "b2")  # no SystemExit: every path works
    assert "check: 17 of 17 paths work here" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the plan: order, estimate, budget


def test_rows_run_in_the_order_a_user_needs_them():
    every = list(catalogue.TRAIN)
    one = plan.ordered(every, 1)
    assert one[:3] == ["synthetic", "amp-synthetic", "baseline"] and one[-3:] == ["dp", "ddp", "fsdp"]
    assert one.index("amp") < one.index("channels_last") < one.index("compile") < one.index("all") < one.index("dali")
    two = plan.ordered(every, 2)
    assert two[two.index("all") + 1 : two.index("all") + 4] == ["dp", "ddp", "fsdp"] and two[-1] == "checkpoint"
    assert plan.ordered(["ddp", "baseline", "amp"], 0) == ["baseline", "amp", "ddp"]


def planned_runs(variants, repeats, workloads=("small",), estimate=10.0):
    return [
        plan.Run(f"{w}-{v}-{r}", v, "train", r, 1, workload=w, estimate_s=estimate)
        for r in range(1, repeats + 1)
        for w in workloads
        for v in variants
    ]


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


@pytest.mark.slow
def test_a_short_budget_keeps_fewer_rounds_and_says_so(tiny_data, tmp_path):
    out = tmp_path / "results"
    args = ["--data", tiny_data, "--out", out, *TINY, "--variants", "baseline,amp,dp", "--loaders", "none"]
    # 30 s: the plan's estimate (a CPU with native bf16, whatever this one is: amp's row 6x longer where emulated)
    # keeps 1 round of the baseline and amp
    env = {"CPUINFO_FLAGS": CPU_CLASSES["bf16"]}
    result = run("-m", "bench", *args, "--repeats", 3, "--budget", "0.5", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "round(s) of the 3 asked (budget 0 min)" in result.stdout or "of the 3 asked" in result.stdout
    rows = record.read_runs(out / "runs.csv")
    assert set(rows["repeat"]) == {1}
    assert "left out to fit the budget: dp" in result.stdout and "dp" not in set(rows["variant"])


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

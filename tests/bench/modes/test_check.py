"""bench/modes/check.py (--check): what makes a path work (it ran, learned and did what it says), the CUDA paths a GPU
machine adds, the exit code."""

import gzip
import json
import pickle
import sys
from pathlib import Path

import pytest

from bench import BenchError, cli
from bench.modes import check
from bench.stages.running import execute
from helpers import run


def row(**fields):
    base = dict(status="ok", error=None, samples_per_s=100.0, train_loss_first=2.3, train_loss_final=1.5)
    return {**base, **fields}


@pytest.mark.slow
def test_the_check_on_a_gpu_machine_runs_every_cuda_path():
    """Planned for 2 GPUs: NCCL at 1 and 2 processes, fp16, reduce-overhead, the snapshot, NVML; and an estimate."""
    result = run("-m", "bench", "--check", "--dry-run", "--gpus", 2)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    n = len(check.paths(2))  # every script of the catalogue and every CUDA path
    assert f"check: {n} of {n} paths apply here, about" in out and "(as measured on an H100)" in out
    commands = [line for line in out.splitlines() if line.startswith("/") or line.startswith(sys.executable)]
    assert any("loader_nvjpeg.py" in c and "--device cuda" in c for c in commands)
    assert len(commands) == n and all("--device" in c for c in commands if "train_ddp.py" not in c or "gloo" in c)
    assert any("--nproc-per-node 1 train_ddp.py" in c and "--device cuda" in c for c in commands)
    assert any("--nproc-per-node 2 train_ddp.py" in c and "--device cuda" in c for c in commands)
    assert any("--amp-dtype fp16" in c for c in commands) and any("reduce-overhead" in c for c in commands)
    assert any("--memory-snapshot" in c for c in commands)
    one = run("-m", "bench", "--check", "--dry-run", "--gpus", 1).stdout
    assert f"check: {n - 2} of {n} paths apply here" in one  # 1 GPU: not NCCL over 2 processes (DDP, FSDP)


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
    config = cli.parse_args(["--check", "--out", str(tmp_path / "out")])  # the flags as python -m bench parses them

    def launch(run, folder, timeout, stop, failing=(), **options):
        failed = any(f in run.cmd for f in failing)
        if "--profile" in run.cmd:  # a trace as torch.profiler writes one
            trace = {"traceEvents": [{"ph": "X", "name": f"ProfilerStep#{i}", "ts": i, "dur": 1} for i in (1, 2, 3)]}
            Path(run.cmd[run.cmd.index("--profile") + 1]).write_bytes(gzip.compress(json.dumps(trace).encode()))
        processes = int(run.cmd[run.cmd.index("--nproc-per-node") + 1]) if "--nproc-per-node" in run.cmd else 1
        return dict(row(), status="failed" if failed else "ok", error="boom" if failed else None, wall_s=1.0,
                    loader="nvjpeg" if "nvjpeg" in " ".join(run.cmd) else "dali", world_size=processes,
                    amp_dtype="bf16", host_syncs_per_step=0,
                    memory_format="channels_last", compile_mode="default", compiled_steps_timed=17, steps_timed=17,
                    fused_step=True, optimizer="adamw",
                    dataset="synthetic" if "synthetic:32:10" in run.cmd else "generated", profile_steps=3,
                    device="cpu")  # fmt: skip

    monkeypatch.setattr(execute, "launch", lambda *a: launch(*a, failing=["train_checkpoint.py"]))
    with pytest.raises(SystemExit) as done:
        check.main(config, info, "b1")
    assert done.value.code == 1
    text = (tmp_path / "out" / "check" / "check.md").read_text()
    assert "| train_checkpoint.py | fails | boom |" in text
    assert "bf16 emulated (no AVX-512-BF16 or AMX)" in text
    monkeypatch.setattr(execute, "launch", lambda *a: launch(*a))
    check.main(config, info, "b2")  # no SystemExit: every path works
    assert "check: 19 of 19 paths work here" in capsys.readouterr().out

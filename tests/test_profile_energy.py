"""Where the time and the energy go: --profile's trace and operators (meter.py, bench/outputs/profiles.py), and the
energy of the timed window from the hardware's counters (bench/observe/energy.py), read through fakes where this machine
has none."""

import gzip
import json
import threading
import time
import types

import pandas as pd
import pytest

import meter
from bench.observe import energy, nvml
from bench.outputs import profiles
from bench.stages import plan
from helpers import SMALL_MODEL, TORCHRUN, check_clean_failure, run, train

PROFILED = ("--steps", 7, "--warmup-steps", 1)  # 2 steps timed, then the profiler's 1 + 3 (tiny data: 7 an epoch)


@pytest.mark.torches
def test_a_profile_is_a_trace_of_the_steps_after_the_window_and_their_operators(script, tiny_data, tmp_path):
    trace = tmp_path / "run.pt.trace.json.gz"
    result, m = train(script[0], tiny_data, tmp_path / "m.json", *script[1:], *PROFILED, "--profile", trace)
    assert result.returncode == 0, result.stderr
    assert m["steps_timed"] == 7 - 1 - 4 and m["profile_steps"] == 3 and m["profile_note"] is None
    assert m["profile_trace"] == str(trace) and "profile 3 steps after the window" in result.stdout
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]  # the Chrome trace format, gzipped
    complete = [e for e in events if e.get("ph") == "X"]
    assert complete and all({"name", "ts", "dur", "pid", "tid"} <= set(e) for e in complete)
    steps = [e for e in complete if e["name"].startswith("ProfilerStep")]
    assert len(steps) == 3
    base = json.loads(gzip.decompress(trace.read_bytes()))["baseTimeNanoseconds"] / 1e9
    window_end = m["timed_spans"][-1][1]
    assert all(base + e["ts"] / 1e6 >= window_end for e in steps), "a profiled step inside the timed window"
    ops = {op["name"]: op for op in m["profile_ops"]}
    assert all(op["on"] == "cpu" for op in m["profile_ops"])  # no GPU here: no kernels
    assert (
        ops["aten::convolution_backward"]["calls_per_step"] > 0 and ops["aten::convolution_backward"]["ms_per_step"] > 0
    )
    times = [op["ms_per_step"] for op in m["profile_ops"]]
    assert times == sorted(times, reverse=True)


def test_a_run_without_profile_records_none(script, tiny_data, tmp_path):
    result, m = train(script[0], tiny_data, tmp_path / "m.json", *script[1:], "--steps", 3, "--warmup-steps", 1)
    assert result.returncode == 0, result.stderr
    assert m["profile_ops"] is None and m["profile_trace"] is None and m["steps_timed"] == 2
    assert len(m["timed_spans"]) == 1 and m["timed_spans"][0][0] < m["timed_spans"][0][1]


@pytest.mark.slow
def test_an_evaluation_among_the_profiled_steps_ends_the_trace(script, tiny_data, tmp_path):
    """Tiny data: 7 steps an epoch at batch 16. With 9 steps the window closes after step 5, the profiler warms up
    in step 6 and records step 7; the epoch's evaluation comes next and is not a training step: the trace ends."""
    trace = tmp_path / "t.json.gz"
    result, m = train(script[0], tiny_data, tmp_path / "m.json", *script[1:], "--steps", 9, "--warmup-steps", 1,
                      "--profile", trace)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert m["profile_steps"] == 1 and "an evaluation came after 1 recorded step" in m["profile_note"]
    steps = [e for e in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    recorded, begun = [e for e in steps if e["name"].startswith("ProfilerStep")]  # and the one the evaluation ended
    assert begun["ts"] >= recorded["ts"] + recorded["dur"] and begun["dur"] < recorded["dur"] / 10
    assert m["eval_pauses"] == 0 and m["steps_timed"] == 4  # the window closed before: its evaluation is not in it


@pytest.mark.slow
def test_under_torchrun_process_0_profiles_and_the_all_reduce_is_among_its_operators(tiny_data, tmp_path):
    trace = tmp_path / "ddp.pt.trace.json.gz"
    result, m = train("train_ddp.py", tiny_data, tmp_path / "m.json", *PROFILED, "--profile", trace, launcher=TORCHRUN)
    assert result.returncode == 0, result.stderr[-3000:]
    assert m["world_size"] == 2 and m["profile_steps"] == 3 and [p.name for p in tmp_path.glob("*.gz")] == [trace.name]
    assert {"c10d::allreduce_", "DistributedDataParallel.forward"} <= {op["name"] for op in m["profile_ops"]}


@pytest.mark.parametrize(
    "where,words",
    [
        ("{tmp}/nosuch/t.json.gz", "cannot write the trace to {tmp}/nosuch/t.json.gz"),
        ("{tmp}", "cannot write the trace to {tmp}: it is a folder"),
        ("{tmp}/file.txt/t.json.gz", "cannot write the trace to {tmp}/file.txt/t.json.gz"),
    ],
    ids=["no-folder", "a-folder", "under-a-file"],
)
def test_a_trace_that_cannot_be_written_is_one_line_before_training(script, tiny_data, tmp_path, where, words):
    (tmp_path / "file.txt").write_text("x")
    metrics = tmp_path / "m.json"
    path = where.format(tmp=tmp_path)
    result, _ = train(script[0], tiny_data, metrics, *script[1:], *PROFILED, "--profile", path)
    check_clean_failure(result, metrics, words.format(tmp=tmp_path))


def test_every_script_takes_profile_and_checks_its_path_first(every_script, tiny_data, tmp_path):
    """--profile is the meter's flag (Meter.add_arguments): every script has it, and refuses a path it cannot write."""
    metrics = tmp_path / "m.json"
    result, _ = train(every_script[0], tiny_data, metrics, *every_script[1:], "--profile", tmp_path / "no" / "t.gz")
    check_clean_failure(result, metrics, f"cannot write the trace to {tmp_path / 'no' / 't.gz'}")


@pytest.mark.parametrize(
    "flags,words",
    [
        (("--steps", 5, "--warmup-steps", 1), "--warmup-steps 1 (+ 4 after the window for --profile) leaves none"),
        (("--target-accuracy", 0.5), "--profile records steps after the timed window, --target-accuracy ends"),
    ],
    ids=["too-few-steps", "target-accuracy"],
)
def test_a_profile_that_cannot_be_taken_is_one_line(script, tiny_data, tmp_path, flags, words):
    metrics = tmp_path / "m.json"
    result, _ = train(script[0], tiny_data, metrics, *script[1:], *flags, "--profile", tmp_path / "t.json.gz")
    check_clean_failure(result, metrics, words)
    assert not (tmp_path / "t.json.gz").exists()


def record_steps(profile, steps=4):
    """Steps of a tiny model under the profile, as the meter drives it."""
    import torch

    model = torch.nn.Linear(8, 2)
    profile.start()
    for _ in range(steps):
        model(torch.randn(4, 8)).sum().backward()
        profile.step()


def test_a_trace_over_the_cap_is_not_kept_and_said_once(monkeypatch, tmp_path, capsys):
    import torch

    monkeypatch.setattr(meter, "PROFILE_CAP_MIB", 0)
    profile = meter.Profile(str(tmp_path / "t.json.gz"), torch.device("cpu"))
    record_steps(profile)
    fields = profile.fields()
    assert fields["profile_trace"] is None and "over the cap of 0 MiB: not kept" in fields["profile_note"]
    assert fields["profile_steps"] == 3 and any(op["name"] == "aten::addmm" for op in fields["profile_ops"])
    assert capsys.readouterr().err.count("over the cap") == 1
    assert list(tmp_path.iterdir()) == []  # neither the trace nor its temporary file


def test_a_trace_under_the_cap_is_written_whole(tmp_path):
    import torch

    profile = meter.Profile(str(tmp_path / "t.json.gz"), torch.device("cpu"))
    record_steps(profile)
    assert profile.fields()["profile_trace"] == str(tmp_path / "t.json.gz")
    assert [p.name for p in tmp_path.iterdir()] == ["t.json.gz"]
    assert json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))["traceEvents"]


def test_the_operators_are_read_per_step_kernels_apart(monkeypatch):
    """Made-up averages as torch.profiler gives them: CPU operators by self CPU time, GPU kernels by self device
    time, the ProfilerStep ranges as the time between operators."""
    event = types.SimpleNamespace
    averages = [
        event(key="aten::mm", count=6, self_cpu_time_total=3000.0, self_device_time_total=900.0, device_type="CPU"),
        event(
            key="sm90_gemm",
            count=6,
            self_cpu_time_total=0.0,
            self_device_time_total=6000.0,
            device_type="DeviceType.CUDA",
        ),  # fmt: skip
        event(key="ProfilerStep*", count=3, self_cpu_time_total=1500.0, self_device_time_total=0, device_type="CPU"),
        event(key="aten::empty", count=3, self_cpu_time_total=0.0, self_device_time_total=0, device_type="CPU"),
    ]
    ops = meter.top_operators(averages, 3)
    assert ops == [
        dict(name="aten::mm", on="cpu", ms_per_step=1.0, calls_per_step=2.0),
        dict(name="(between operators)", on="cpu", ms_per_step=0.5, calls_per_step=1.0),
        dict(name="sm90_gemm", on="gpu", ms_per_step=2.0, calls_per_step=2.0),
    ]


def test_the_changed_operators_are_the_largest_changes_named_by_kind():
    ops = lambda **ms: [dict(name=n, on="cpu", ms_per_step=v, calls_per_step=1) for n, v in ms.items()]  # noqa: E731
    profiled = {
        "small": {
            "baseline": dict(ops=ops(conv=100.0, bn=40.0, relu=10.0, copy=5.0)),
            "amp": dict(ops=ops(conv=60.0, bn=48.0, relu=10.0, to_bf16=20.0)),
        }
    }
    changes = profiles.changes(profiled, "small", "amp")
    assert [(c["name"], c["change"]) for c in changes] == [
        ("conv", "faster"),
        ("to_bf16", "new"),
        ("bn", "slower"),
        ("copy", "gone"),
    ]  # relu did not change: not shown
    assert profiles.changes(profiled, "small", "baseline") == [] and profiles.changes(profiled, "vit", "amp") == []


def test_the_bench_profile_flag_goes_with_a_bench_and_enough_steps(tiny_data, tmp_path):
    for args, words in [
        (["--check", "--profile"], "--profile goes with a bench or --resume, not --check"),
        (["--steps", 5, "--warmup-steps", 1, "--profile"], "--profile records 4 steps after the window"),
    ]:
        result = run("-m", "bench", "--data", tiny_data, "--out", tmp_path / "results", *args)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert words in result.stderr and "Traceback" not in result.stderr
    assert plan.PROFILE_STEPS == meter.PROFILE_WARMUP + meter.PROFILE_ACTIVE


# ----------------------------------------------------------------------------- energy


def rapl(root, zones=1, top=10**12):
    """A powercap tree like Linux's: intel-rapl:N (a package) with a part intel-rapl:N:0 that is not counted."""
    for n in range(zones):
        zone = root / f"intel-rapl:{n}"
        (zone / f"intel-rapl:{n}:0").mkdir(parents=True)
        (zone / "name").write_text(f"package-{n}\n")
        (zone / "energy_uj").write_text("0\n")
        (zone / "max_energy_range_uj").write_text(f"{top}\n")
        (zone / "constraint_0_power_limit_uw").write_text("65000000\n")
        (zone / f"intel-rapl:{n}:0" / "energy_uj").write_text("999999999\n")
    return root


def set_uj(root, *values):
    """The counters now: each file replaced whole, as sysfs reads are (never an empty file half-written)."""
    for n, value in enumerate(values):
        tmp = root / f"intel-rapl:{n}" / ".energy_uj"
        tmp.write_text(f"{value}\n")
        tmp.replace(root / f"intel-rapl:{n}" / "energy_uj")


def test_the_package_counters_are_summed_and_their_wraps_undone(tmp_path):
    root = rapl(tmp_path, zones=2, top=1_000_000)
    set_uj(root, 900_000, 100)
    packages = energy.Packages(root)
    assert packages.source.startswith("RAPL package-0, package-1") and packages.limit_w == 130.0
    set_uj(root, 950_000, 200_100)  # +0.05 J, +0.2 J
    assert packages.read() == pytest.approx(0.25)
    set_uj(root, 20_000, 400_100)  # package 0 wrapped at 1 J: +0.07 J; +0.2 J
    assert packages.read() == pytest.approx(0.52)


def test_a_counter_that_cannot_be_read_or_goes_back_gives_no_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "POWERCAP", tmp_path / "none")
    row = energy.Recorder().fields([[0, 1]], 100)
    assert row["energy_j"] is None and row["energy_per_1k_samples_j"] is None
    assert row["energy_source"].startswith("unavailable: no RAPL package counter in")
    root = rapl(tmp_path / "pc")
    monkeypatch.setattr(energy, "POWERCAP", root)
    recorder = energy.Recorder()
    (root / "intel-rapl:0" / "energy_uj").unlink()
    (root / "intel-rapl:0" / "energy_uj").mkdir()  # unreadable
    recorder.sample()
    assert recorder.fields([[0, 1]], 100)["energy_source"].startswith("unavailable: the RAPL counter cannot be read")
    root = rapl(tmp_path / "back")
    (root / "intel-rapl:0" / "max_energy_range_uj").unlink()
    set_uj(root, 5_000_000)
    monkeypatch.setattr(energy, "POWERCAP", root)
    recorder = energy.Recorder()
    set_uj(root, 1_000)
    recorder.sample()
    assert "went backwards" in recorder.fields([[0, 1]], 100)["energy_source"]


def test_the_window_energy_is_the_counter_interpolated_at_its_edges(tmp_path, monkeypatch):
    root = rapl(tmp_path)
    monkeypatch.setattr(energy, "POWERCAP", root)
    recorder = energy.Recorder()
    start = recorder.readings[0][0]
    recorder.readings = [(start, 0.0), (start + 1, 10.0), (start + 2, 30.0), (start + 3, 30.0)]  # 10 W, 20 W, idle
    row = recorder.fields([[start + 0.5, start + 1.5], [start + 2.5, start + 3]], samples=50)
    assert row["energy_j"] == pytest.approx(5.0 + 10.0 + 0.0)
    assert row["energy_per_1k_samples_j"] == pytest.approx(300.0) and row["avg_power_w"] == pytest.approx(10.0)
    assert row["power_limit_w"] == 65.0 and "RAPL package-0" in row["energy_source"]
    late = recorder.fields([[start + 2, start + 9]], samples=50)
    assert late["energy_j"] is None and "not read around the whole window" in late["energy_source"]
    still = recorder.fields([[start + 2.2, start + 2.9]], samples=50)  # between two readings of the same counter
    assert still["energy_j"] is None and still["avg_power_w"] is None
    assert "the counter did not move over the window" in still["energy_source"]  # not 0 W: no device draws nothing


class EnergyNVML:
    """pynvml's energy readings for two GPUs: mJ since the driver loaded, 300 W each, or going back."""

    class NVMLError(Exception):
        pass

    def __init__(self, back=False):
        self.mj, self.back = {"gpu0": 5_000_000, "gpu1": 7_000_000}, back

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802 (pynvml's names)
        self.mj[handle] += -1000 if self.back else 300  # a reading every millisecond of 300 W
        return self.mj[handle]

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):  # noqa: N802
        return 700_000


def test_the_gpus_counters_are_read_through_nvml(monkeypatch):
    monkeypatch.setattr(nvml, "pynvml", EnergyNVML())
    gpus = energy.GPUs(["gpu0", "gpu1"])
    assert gpus.limit_w == 1400.0 and gpus.source == "NVML total energy of 2 GPUs"
    assert gpus.read() == pytest.approx(0.6)  # 300 mJ each since the first reading
    monkeypatch.setattr(nvml, "pynvml", EnergyNVML(back=True))
    with pytest.raises(energy.Unreadable, match="went backwards"):
        energy.GPUs(["gpu0"]).read()
    monkeypatch.setattr(nvml, "pynvml", None)
    assert "nvidia-ml-py is not installed" in energy.Recorder(["gpu0"], gpu=True).error
    assert energy.Recorder([], gpu=True).error == "no GPU that NVML can read"


@pytest.mark.slow
def test_a_profiled_bench_with_a_power_counter_reports_operators_and_energy(tiny_data, tmp_path):
    """A fake RAPL counter that a thread drives at 20 W: every training run's row has the energy of its window
    at that power, the tables a J per 1k samples column, amp's verdict its energy against the baseline's; round 1
    is profiled, its traces beside the logs, and amp's section in the report shows the operators it changed."""
    root = rapl(tmp_path / "powercap")
    going, started = threading.Event(), time.time()

    def drive():
        while not going.wait(0.01):
            set_uj(root, int(20e6 * (time.time() - started)))

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    out = tmp_path / "results"
    flags = ["--variants", "baseline,amp", "--loaders", "none", "--repeats", 2, "--steps", 7, "--warmup-steps", 1]
    # shufflenet's steps, not the tiny model's (6 of them took ~10 ms, one update of the fake counter: one window read
    # 0 J); its windows of a few tenths of a second hold tens of updates
    flags += ["--batch-size", 16, "--workers", 1, "--model", SMALL_MODEL, "--profile"]
    try:
        result = run("-m", "bench", "--data", tiny_data, "--out", out, *flags, env={"BENCH_POWERCAP": str(root)})
    finally:
        going.set()
        thread.join()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    runs = pd.read_csv(out / "runs.csv")
    # each window is a fraction of a second, the counter moves every 10 ms: each run within 15%, all of them within 5%
    assert (runs["avg_power_w"].between(17.0, 23.0)).all(), runs[["avg_power_w", "energy_source"]]
    assert 19.0 < runs["energy_j"].sum() / (runs["energy_j"] / runs["avg_power_w"]).sum() < 21.0
    assert runs["energy_source"].str.startswith("RAPL package-0").all()
    samples = runs["steps_timed"] * runs["global_batch_size"]
    assert (runs["energy_per_1k_samples_j"] - 1e3 * runs["energy_j"] / samples).abs().max() < 1e-6
    traced = runs[runs["profile_trace"].notna()]
    assert sorted(traced["run"]) == ["amp-1", "baseline-1"] and (traced["profile_steps"] == 3).all()
    logs = next((out / "logs").iterdir())
    assert sorted(p.name for p in logs.glob("*.pt.trace.json.gz")) == [
        "amp-1.pt.trace.json.gz",
        "baseline-1.pt.trace.json.gz",
    ]
    summary = (out / "summary.md").read_text()
    assert "J per 1k samples" in summary and "the energy per sample" in summary
    assert "J per 1,000 samples (RAPL package-0" in summary
    assert "Energy (J per 1k samples) over each run's timed window, from RAPL package-0" in summary
    html = (out / "report.html").read_text()
    assert "The operators whose time changed most" in html and "from RAPL package-0 (powercap" in html
    section = html.split('id="technique-amp"')[1].split("</section>")[0]
    assert "<td>cpu</td>" in section and ("faster" in section or "slower" in section)
    saved = json.loads((out / "profiles.json").read_text())["workloads"]["custom"]
    assert set(saved) == {"baseline", "amp"} and saved["amp"]["trace"] == "amp-1.pt.trace.json.gz"

"""meter.py: the timed window, the data wait, the memory peaks, FLOPs and MFU, the curves, TensorBoard, the profile and
the memory snapshot."""

import gzip
import json
import math
import pickle
import re
import shutil
import sys
import types

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import checks
import meter
from helpers import (
    PROFILED,
    ROOT,
    SCRIPTS,
    SHORT,
    SMALL_MODEL,
    TIMED,
    TINY_MODEL,
    check_clean_failure,
    fast_first,
    run,
    train,
)

# tiny_data has 120 training images: batch 10 is 12 steps an epoch, 2 epochs 24 steps
EPOCHS = ("--epochs", 2, "--batch-size", 10, "--warmup-steps", 2, "--eval-samples", 20)


@pytest.fixture(scope="session")
def two_epochs(tiny_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("curves")
    result, metrics = train("train.py", tiny_data, folder / "m.json", *EPOCHS, "--tensorboard", folder / "tb")
    assert result.returncode == 0, result.stderr
    return metrics, folder / "tb"


TRAINING = sorted({command[0] for command in SCRIPTS.values()})


NAMES_THE_METER = re.compile(r"\bmeter\b", re.IGNORECASE)


# imports the stripped script from the folder it lies in, counts its optimizer steps and its evaluations, runs it
RUNNER = """
import importlib.util, json, sys, weakref
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

path, out = sys.argv[1], sys.argv[2]
sys.argv = [path, *sys.argv[3:]]
spec = importlib.util.spec_from_file_location("stripped", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
counts = dict(steps=0, evaluations=[])
stepped = weakref.WeakKeyDictionary()  # steps per optimizer: the training one's are counted (checks.py tries one apart)


def count(optimizer, *args):
    stepped[optimizer] = stepped.get(optimizer, 0) + 1
    counts["steps"] = max(counts["steps"], stepped[optimizer])


register_optimizer_step_post_hook(count)
evaluate = module.evaluate


def counted(*args):
    result = evaluate(*args)
    counts["evaluations"].append(result)
    return result


module.evaluate = counted
module.main()
open(out, "w").write(json.dumps(counts))
"""


def record_steps(profile, steps=4):
    """Steps of a tiny model under the profile, as the meter drives it."""
    import torch

    model = torch.nn.Linear(8, 2)
    profile.start()
    for _ in range(steps):
        model(torch.randn(4, 8)).sum().backward()
        profile.step()


# tiny_data: 120 training images, batch 16, the last partial batch dropped: 7 steps an epoch
STEPS = ("--steps", 20, "--batch-size", 16, "--workers", 0)


def slowed(tmp_path, data, train_delay, eval_delay, *args, script="train.py"):
    metrics = tmp_path / "m.json"
    cmd = ["tests/slow_probe.py", script, train_delay, eval_delay, "--data", data, "--model", SMALL_MODEL]
    result = run(*cmd, "--no-progress", "--metrics-out", metrics, *STEPS, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(metrics.read_text())


def gpu_run(name, amp=None, matmul="fp32", conv="tf32"):
    return dict(device="cuda", device_name=name, amp_dtype=amp, matmul_precision=matmul, conv_precision=conv)


class Clock:
    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now

    def time(self):  # the wall clock, of the timed spans (the bench reads its energy there): the same clock, moved
        return 1.7e9 + self.now

    def advance(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    made_up = Clock()
    monkeypatch.setattr(meter, "time", made_up)
    return made_up


def play(clock, tmp_path, warmup=2, epochs=2, per_epoch=4, batch=8, wait=0.5, compute=1.0, first=30.0, eval_s=7.0,
         target=None, accuracies=(0.5, 0.9), before=None, each_step=None, refill=0.0):  # fmt: skip
    """The loop of train.py against the meter: (the metrics written, the meter). before(meter): what a technique
    tells the meter before the loop; each_step(step): a technique's step (before the meter's); refill: the extra wait
    for an epoch's first batch."""
    args = types.SimpleNamespace(warmup_steps=warmup, metrics_out=str(tmp_path / "m.json"), no_progress=True,
                                 target_accuracy=target, tensorboard=None, memory_snapshot=None, profile=None,
                                 loader="torchvision", model="m", workers=0, seed=0, eval_samples=None,
                                 optimizer="sgd")  # fmt: skip
    info = types.SimpleNamespace(dataset="generated", image_size=16, num_classes=10, loader="torch", train_size=32,
                                 val_size=40, dali_version=None)  # fmt: skip
    m = meter.Meter(args, torch.device("cpu"))
    if before:
        before(m)
    clock.advance(3.0)  # the setup: data checked, loaders and model built
    m.start(info, batch, epochs * per_epoch)
    for epoch in m.until_target(range(epochs)):
        for i in range(per_epoch):
            clock.advance(wait + (refill if i == 0 else 0.0))  # the host waits for the batch
            m.batch()
            clock.advance(first if m.steps == 0 else compute)  # the step: the first one compiles
            if each_step:
                each_step(m.steps)
            m.step(torch.tensor(2.0 - 0.1 * m.steps))
        m.pause()
        clock.advance(eval_s)
        m.evaluated(accuracies[epoch], 40)
    m.finish()
    return json.loads((tmp_path / "m.json").read_text()), m


class Memory:
    """A made-up GPU caching allocator: what the loop allocates raises the allocated peak and stays cached when freed
    (reserved: what is held and cached), a reset brings the peaks down to what is held now, empty_cache gives the
    cache back."""

    def __init__(self):
        self.held, self.cached, self.peak, self.reserved, self.emptied = 10.0, 0.0, 10.0, 10.0, 0

    def use(self, mib):
        self.cached = max(self.cached, mib)
        self.peak, self.reserved = max(self.peak, self.held + mib), max(self.reserved, self.held + self.cached)

    def reset(self, device):
        self.peak, self.reserved = self.held, self.held + self.cached

    def empty_cache(self):
        self.cached, self.emptied = 0.0, self.emptied + 1


def test_a_run_has_a_loss_point_per_ten_steps_and_an_accuracy_point_per_evaluation(two_epochs):
    m, _ = two_epochs
    assert [step for step, _ in m["loss_curve"]] == [10, 20, 24]  # the last interval is the 4 steps left
    assert m["loss_curve"][0][1] == pytest.approx(m["train_loss_first"])  # the mean of the first 10 steps
    assert [(p["epoch"], p["step"]) for p in m["val_curve"]] == [(1, 12), (2, 24)]
    assert m["val_curve"][-1]["val_acc"] == m["val_acc"]
    train_s = [p["train_s"] for p in m["val_curve"]]
    assert 0 < train_s[0] < train_s[1] and all(p["train_s"] < p["wall_s"] for p in m["val_curve"])
    # the training time to the end is the warm-up and the window: evaluations and setup are left out
    assert train_s[1] == pytest.approx(m["warmup_s"] + m["window_s"], abs=1.0)
    assert m["val_curve"][1]["wall_s"] >= m["setup_s"] + m["warmup_s"] + m["window_s"] + m["eval_s"] - 0.1


def test_tensorboard_holds_the_same_curves_and_the_speed(two_epochs):
    m, folder = two_epochs
    events = EventAccumulator(str(folder))
    events.Reload()
    loss = [(e.step, e.value) for e in events.Scalars("train/loss")]
    assert [s for s, _ in loss] == [s for s, _ in m["loss_curve"]]
    assert [v for _, v in loss] == pytest.approx([v for _, v in m["loss_curve"]], rel=1e-6)
    accuracy = [(e.step, e.value) for e in events.Scalars("val/accuracy")]
    assert accuracy == [(p["step"], pytest.approx(p["val_acc"])) for p in m["val_curve"]]
    (speed,) = events.Scalars("train/samples_per_s")
    assert speed.step == 24 and speed.value == pytest.approx(m["samples_per_s"], rel=1e-6)


def test_every_training_script_is_checked():
    assert TRAINING and set(TRAINING) == {p.name for p in ROOT.glob("train*.py")}


@pytest.mark.parametrize("script", fast_first(TRAINING))
def test_without_the_meter_a_script_still_trains_and_evaluates(script, tiny_data, tmp_path):
    """Every line naming the meter is deleted (its import too); meter.py is not beside the copy, so nothing can
    reach it. The copy trains its steps and evaluates after each epoch, as the script does."""
    text = (ROOT / script).read_text()
    kept = [line for line in text.splitlines() if not NAMES_THE_METER.search(line)]
    assert len(kept) < len(text.splitlines()) - 5  # the meter's lines were there, and are gone
    for name in ("checks.py", "cpu.py", "loader.py", "loader_dali.py", "loader_nvjpeg.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / script).write_text("\n".join(kept) + "\n")
    (tmp_path / "cli.py").write_text(RUNNER)
    out = tmp_path / "counts.json"
    flags = ["--data", tiny_data, "--model", TINY_MODEL, "--batch-size", 16, "--workers", 0]
    flags += ["--epochs", 2]
    result = run(tmp_path / "cli.py", tmp_path / script, out, *flags, "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(out.read_text())
    assert counts["steps"] == 2 * (120 // 16)  # 2 epochs of 7 full batches
    assert len(counts["evaluations"]) == 2 and all(images == 40 for _, images in counts["evaluations"])
    assert not (tmp_path / "meter.py").exists()


def test_a_target_reached_where_the_window_opens_times_the_next_epoch(tiny_data, tmp_path):
    """--warmup-steps an epoch long: the window opens at the first evaluation, which reaches the target; no step has
    been timed, so the run goes on and stops at the next evaluation, having timed that epoch."""
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--warmup-steps", 7, "--epochs", 4,
                      "--target-accuracy", 1e-9)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert m["steps_timed"] == 7 and len(m["val_curve"]) == 2 and m["epoch_starts_timed"] == 1
    assert "reached --target-accuracy" in result.stdout and "stopped after 14 steps" in result.stdout


def test_memory_snapshot_needs_cuda(script, tiny_data, tmp_path):
    metrics, snapshot = tmp_path / "m.json", tmp_path / "snapshot.pickle"
    env = {"CUDA_VISIBLE_DEVICES": ""}
    result, _ = train(script[0], tiny_data, metrics, *script[1:], "--memory-snapshot", snapshot, env=env)
    check_clean_failure(result, metrics, "--memory-snapshot records the CUDA allocator's history", "on the cpu")
    assert not snapshot.exists()


def test_memory_snapshot_path_is_checked_first(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--memory-snapshot", tmp_path)
    check_clean_failure(result, metrics, f"cannot write the memory snapshot to {tmp_path}: it is a folder")


def test_memory_snapshot_is_written_whole_and_stops_the_recording(monkeypatch, tmp_path):
    """The CUDA calls stubbed: what is dumped is the allocator's snapshot, and recording stops after it."""
    sys.path.insert(0, str(ROOT))
    import torch

    import meter

    calls = []
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda: {"segments": [], "device_traces": [[1, 2]]})
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda **kw: calls.append(kw))
    path = tmp_path / "snapshot.pickle"
    checks.write_whole(str(path), "the memory snapshot", pickle.dumps(meter.take_snapshot()))
    assert path.read_bytes() == pickle.dumps({"segments": [], "device_traces": [[1, 2]]})  # what was dumped, whole
    assert calls == [{"enabled": None}] and not (tmp_path / "snapshot.pickle.tmp").exists()


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


@pytest.mark.parametrize(
    "script", [SCRIPTS["train"], *(pytest.param(SCRIPTS[name], marks=pytest.mark.slow) for name in ("amp", "all"))]
)
def test_a_diverged_run_says_so(script, tiny_data, tmp_path):
    """The base, and the variants that change how the loss is computed (autocast; and the whole recipe)."""
    metrics = tmp_path / "m.json"
    small = ("--model", TINY_MODEL)  # any model diverges so; a tiny graph compiles fast
    result, written = train(script[0], tiny_data, metrics, *script[1:], *TIMED, "--lr", "1e30", "--steps", 6, *small)
    assert result.returncode == 0, result.stderr
    assert isinstance(written["diverged_step"], int) and 1 <= written["diverged_step"] <= 6
    assert f"the loss stopped being a finite number at step {written['diverged_step']}" in result.stderr


def test_a_sound_run_has_not_diverged(tiny_data, tmp_path):
    result, written = train("train.py", tiny_data, tmp_path / "m.json", *TIMED)
    assert result.returncode == 0 and written["diverged_step"] is None and "finite" not in result.stderr


@pytest.mark.slow
@pytest.mark.alone
def test_a_known_delay_per_batch_is_the_data_wait(tiny_data, tmp_path):
    delay = 0.1
    m = slowed(tmp_path, tiny_data, delay, 0, "--warmup-steps", 2)
    assert m["steps_timed"] == 18
    waited = m["data_wait_frac"] * m["window_s"]
    assert 18 * delay <= waited <= 18 * delay * 1.3 + 0.3, waited  # the delay, and the loader's own little time
    starved = m["starved_frac"] * m["window_s"]  # on a CPU, from host clocks: the same wait seen from the step
    assert 18 * delay <= starved <= 18 * delay * 1.3 + 0.3, starved
    # the compute rate leaves the wait out: it is what the same steps take with the data ready
    compute_s = 18 * 16 / m["compute_samples_per_s"]
    assert compute_s == pytest.approx(m["window_s"] - starved, rel=1e-6)


@pytest.mark.slow
def test_epoch_starts_inside_the_window_are_counted_exactly(tiny_data, tmp_path):
    # steps 1-2 warm up; epochs begin at steps 1, 8 and 15: two of them in the window
    result, m = train("train.py", tiny_data, tmp_path / "a.json", *STEPS, "--warmup-steps", 2)
    assert result.returncode == 0, result.stderr
    assert m["epoch_starts_timed"] == 2 and m["eval_pauses"] == 2  # the epochs ended at steps 7 and 14
    result, m = train("train.py", tiny_data, tmp_path / "b.json", *STEPS, "--warmup-steps", 0)
    assert result.returncode == 0, result.stderr
    assert m["epoch_starts_timed"] == 3 and m["steps_timed"] == 20
    result, m = train("train.py", tiny_data, tmp_path / "c.json", *STEPS, "--warmup-steps", 8)
    assert m["epoch_starts_timed"] == 1 and m["eval_pauses"] == 1


@pytest.mark.slow
@pytest.mark.alone
def test_evaluation_is_left_out_of_the_window(tiny_data, tmp_path):
    """3 validation batches of 1 s each, after each of the 2 epochs that end inside the window: 6 s paused."""
    m = slowed(tmp_path, tiny_data, 0, 1.0, "--warmup-steps", 2)
    assert m["eval_pauses"] == 2
    assert m["window_s"] < 6, m["window_s"]  # the 6 s of evaluation would be in it; the 18 steps take tenths
    assert m["data_wait_frac"] < 0.5


@pytest.mark.parametrize("script", fast_first(["train.py", "train_amp.py"]))
def test_synthetic_data_trains_with_no_data_wait(tmp_path, script):
    result, m = train(script, "synthetic:24:7", tmp_path / "m.json", "--steps", 30, "--warmup-steps", 3)
    assert result.returncode == 0, result.stderr
    assert m["dataset"] == "synthetic" and m["loader"] == "synthetic"
    assert m["image_size"] == 24 and m["num_classes"] == 7 and m["steps_timed"] == 27
    assert m["data_wait_frac"] < 0.005 and m["epoch_starts_timed"] == 0
    assert m["train_loss_final"] < 1.0  # the one batch it sees again and again is learnt (ln 7 = 1.95 at chance)
    assert m["val_samples"] == 256  # synthetic validation: 256 images, the one batch again


def test_a_run_records_its_start_and_each_warm_up_step(tiny_data, tmp_path):
    """The seconds before the meter (the interpreter, the imports: start_s) and each warm-up step, the first one
    first_step_s: where a run's time outside its window goes, step by step."""
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--steps", 8, "--warmup-steps", 4)
    assert result.returncode == 0, result.stderr
    assert 0 < m["start_s"] < 600 and len(m["warmup_step_ms"]) == 4 and all(ms > 0 for ms in m["warmup_step_ms"])
    assert m["warmup_step_ms"][0] == pytest.approx(1e3 * m["first_step_s"])
    assert sum(m["warmup_step_ms"]) / 1e3 <= m["warmup_s"] and m["written_unix_s"] > 0


@pytest.mark.torches
def test_every_run_counts_its_flops_outside_the_window_and_none_without_a_warm_up(tiny_data, tmp_path):
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--model", SMALL_MODEL, *SHORT)
    assert result.returncode == 0, result.stderr
    assert m["flop_per_step"] > 0 and m["optimizer"] == "sgd"
    rate = m["flop_per_step"] * m["steps_timed"] / m["window_s"] / 1e12
    assert m["achieved_tflop_per_s"] == pytest.approx(rate, rel=1e-6)
    assert m["mfu_pct"] is None and m["peak_tflop_per_s"] is None  # a CPU: no peak, never guessed
    assert (m["matmul_precision"], m["conv_precision"]) == ("fp32", "fp32")
    assert "GFLOP per step" in result.stdout
    result, m = train("train.py", tiny_data, tmp_path / "n.json", "--model", SMALL_MODEL, *SHORT, "--warmup-steps", "0")
    assert result.returncode == 0 and m["flop_per_step"] is None and m["achieved_tflop_per_s"] is None


@pytest.mark.torches
def test_attention_on_a_cpu_is_counted():
    """torch's FLOP counter has no formula for the CPU's fused attention: the meter gives it the GPU kernels' (a ViT's
    attention went uncounted on a CPU). Two batched matmuls forward, five backward, 2 FLOPs a multiply-add."""
    b, h, s, d = 2, 4, 16, 8
    q, k, v = (torch.randn(b, h, s, d, requires_grad=True) for _ in range(3))
    with meter.flop_counter() as counter:  # the mode the meter counts a step's FLOPs with
        torch.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()
    assert counter.get_total_flops() == (2 + 5) * 2 * b * h * s * s * d


@pytest.mark.torches
def test_a_convolutions_flops_forward_and_backward_are_priced_as_convolution():
    """The split picks each operation's peak for MFU: a convolution's backward (its input's and its weight's
    gradients, 2x its forward) is a convolution too, and only the linear layer is the rest. Counting the forward
    alone as convolution would price two thirds of a CNN's FLOPs at the matmul peak."""
    n, c, k, hw, classes = 4, 3, 8, 16, 10
    model = torch.nn.Sequential(torch.nn.Conv2d(c, k, 3, padding=1, bias=False), torch.nn.Flatten(),
                                torch.nn.Linear(k * hw * hw, classes, bias=False))  # fmt: skip
    with meter.flop_counter() as counter:
        model(torch.randn(n, c, hw, hw, requires_grad=True)).sum().backward()
    conv_forward = 2 * n * k * hw * hw * c * 3 * 3
    linear_forward = 2 * n * k * hw * hw * classes
    assert meter.split_flops(counter) == (3 * conv_forward, 3 * linear_forward)


def test_mfu_is_against_the_datasheet_peak_of_each_operations_precision_and_only_where_known():
    flops = [(2e12, 6e12)]  # one process: 2 TFLOP in convolutions, 6 in the rest, a step
    h100 = meter.flop_rates(gpu_run("NVIDIA H100 80GB HBM3", amp="bf16"), flops, steps_per_s=50)
    assert h100["achieved_tflop_per_s"] == pytest.approx(400) and h100["peak_tflop_per_s"] == pytest.approx(989.4)
    assert h100["mfu_pct"] == pytest.approx(100 * 400 / 989.4)
    mixed = meter.flop_rates(gpu_run("NVIDIA A100-SXM4-80GB"), flops, steps_per_s=1)  # TF32 convs, fp32 matmuls
    assert mixed["peak_tflop_per_s"] == pytest.approx(8 / (2 / 156 + 6 / 19.5))
    two = meter.flop_rates(gpu_run("NVIDIA H100 PCIe", matmul="tf32"), flops * 2, steps_per_s=1)  # 2 processes
    assert two["flop_per_step"] == 16e12 and two["peak_tflop_per_s"] == pytest.approx(2 * 378.0)  # 2 GPUs' peak
    one = meter.flop_rates(gpu_run("NVIDIA H100 PCIe", matmul="tf32"), flops, steps_per_s=1)
    assert two["mfu_pct"] == pytest.approx(one["mfu_pct"])  # twice the work on twice the GPUs: the same share
    for a100 in ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-40GB"):
        assert meter.peak_tflops(a100, "bf16") == 312.0, a100
    for unknown in ("NVIDIA H200 NVL", "NVIDIA L40S", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 4090",
                    "NVIDIA RTX A1000", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
                    "NVIDIA L40", "NVIDIA L4 MIG"):  # fmt: skip
        rates = meter.flop_rates(gpu_run(unknown), flops, steps_per_s=1)
        assert rates["mfu_pct"] is None and rates["achieved_tflop_per_s"] == pytest.approx(8), unknown
    cpu = meter.flop_rates(dict(device="cpu", device_name="Xeon", amp_dtype=None), flops, steps_per_s=1)
    assert cpu["mfu_pct"] is None and cpu["flop_per_step"] == 8e12
    assert meter.flop_rates(gpu_run("NVIDIA H200"), [(1, 1), None], 1)["flop_per_step"] is None  # a rank without


@pytest.mark.torches
def test_the_precision_recorded_is_what_torch_was_set_to():
    """Each backend's own switch (torch >= 2.9), as train_tf32.py sets them: once one is set, torch refuses to read
    the old ones (allow_tf32, get_float32_matmul_precision), so the meter reads the new ones (the GPU's flags are
    global: a CPU sets and reads them too)."""
    cuda, mkldnn = torch.backends.cuda.matmul, torch.backends.mkldnn
    before = cuda.fp32_precision, mkldnn.matmul.fp32_precision, mkldnn.conv.fp32_precision
    try:
        assert meter.precisions(torch.device("cpu")) == ("fp32", "fp32")
        assert meter.precisions(torch.device("cuda")) == ("fp32", "tf32")  # cuDNN's convolutions: TF32 by default
        cuda.fp32_precision = "tf32"
        assert meter.precisions(torch.device("cuda")) == ("tf32", "tf32")
        mkldnn.matmul.fp32_precision, mkldnn.conv.fp32_precision = "bf16", "bf16"
        assert meter.precisions(torch.device("cpu")) == ("bf16", "bf16")
    finally:
        cuda.fp32_precision, mkldnn.matmul.fp32_precision, mkldnn.conv.fp32_precision = before


def test_the_window_times_the_steps_after_the_warm_up_and_leaves_evaluation_out(clock, tmp_path, capsys):
    metrics, _ = play(clock, tmp_path)
    steps = 2 * 4 - 2  # 8 steps, 2 of them warm-up
    # the window opens at the end of step 2; it holds 6 steps of (wait + compute) and, between the epochs, the batch
    # wait after the evaluation; the evaluation's 7 s are paused out
    assert metrics["steps_timed"] == steps
    assert metrics["window_s"] == pytest.approx(steps * (0.5 + 1.0))
    assert metrics["samples_per_s"] == pytest.approx(steps * 8 / (steps * 1.5))
    assert metrics["step_time_median_ms"] == pytest.approx(1500.0)  # a step: from the last one's end to its own
    assert metrics["data_wait_frac"] == pytest.approx(0.5 / 1.5)  # the host's wait for each batch
    assert metrics["starved_frac"] == pytest.approx(0.5 / 1.5)  # on a CPU: the same wait, seen from the step
    assert metrics["compute_samples_per_s"] == pytest.approx(steps * 8 / (steps * 1.0))
    assert metrics["epoch_starts_timed"] == 1 and metrics["eval_pauses"] == 1  # epoch 2 began inside the window
    spans = metrics["timed_spans"]  # the window's two stretches, the evaluation between them left out
    assert len(spans) == 2 and sum(b - a for a, b in spans) == pytest.approx(metrics["window_s"])
    assert spans[1][0] - spans[0][1] == pytest.approx(7.0)
    assert metrics["eval_s"] == pytest.approx(2 * 7.0) and metrics["setup_s"] == pytest.approx(3.0)
    assert metrics["first_step_s"] == pytest.approx(30.0)  # the first step alone (a compile), outside the window
    assert metrics["warmup_s"] == pytest.approx(0.5 + 30.0 + 0.5 + 1.0)
    assert metrics["val_acc"] == 0.9 and metrics["train_loss_first"] == pytest.approx(1.85)
    assert metrics["epoch_time_s"] == pytest.approx(32 * metrics["window_s"] / (steps * 8))
    assert f"speed   {steps * 8 / (steps * 1.5):.1f} samples/s" in capsys.readouterr().out


def test_the_refill_at_an_epoch_start_is_measured_apart_from_the_steady_wait(clock, tmp_path, capsys):
    """An epoch's first batch waits 4 s more (the loader's refill) than the others' 0.5 s: the window holds one such
    step (epoch 2's first); its wait is epoch_start_wait_s, and the steady fields leave that step out."""
    metrics, _ = play(clock, tmp_path, refill=4.0)
    steps = 6  # 2 of the 8 warm up; step 5, epoch 2's first, is in the window
    assert metrics["epoch_starts_timed"] == 1 and metrics["epoch_start_wait_s"] == pytest.approx(4.5)
    assert metrics["window_s"] == pytest.approx(steps * 1.5 + 4.0)
    assert metrics["data_wait_frac"] == pytest.approx((steps * 0.5 + 4.0) / (steps * 1.5 + 4.0))
    assert metrics["data_wait_steady_frac"] == pytest.approx(0.5 / 1.5)  # the other 5 steps: as without a refill
    assert metrics["starved_steady_frac"] == pytest.approx(0.5 / 1.5)
    assert metrics["steady_samples_per_s"] == pytest.approx(5 * 8 / (5 * 1.5))
    assert metrics["samples_per_s"] == pytest.approx(steps * 8 / (steps * 1.5 + 4.0))
    assert metrics["steps_per_epoch"] == 4
    assert "1 epoch start timed (waited 4.50 s for them; 33.3% between them)" in capsys.readouterr().out
    quiet, _ = play(clock, tmp_path, warmup=1, epochs=1)  # no epoch start in the window: the steady fields are all
    assert quiet["epoch_starts_timed"] == 0 and quiet["epoch_start_wait_s"] == 0
    assert quiet["steady_samples_per_s"] == pytest.approx(quiet["samples_per_s"])
    assert quiet["data_wait_steady_frac"] == pytest.approx(quiet["data_wait_frac"])


def test_a_slower_step_inside_the_window_moves_the_median_and_the_rate_alike(clock, tmp_path):
    fast, _ = play(clock, tmp_path, compute=1.0)
    slow, _ = play(clock, tmp_path, compute=2.0)
    assert slow["window_s"] - fast["window_s"] == pytest.approx(6 * 1.0)
    assert slow["step_time_median_ms"] == pytest.approx(2500.0)
    assert slow["samples_per_s"] < fast["samples_per_s"]


def test_a_warm_up_of_a_whole_epoch_opens_the_window_at_the_next_epoch(clock, tmp_path):
    metrics, _ = play(clock, tmp_path, warmup=4)
    assert metrics["steps_timed"] == 4 and metrics["window_s"] == pytest.approx(4 * 1.5)
    # the window opened as epoch 1 ended: the evaluation after it is paused out, epoch 2's start is in the window
    assert metrics["eval_pauses"] == 1 and metrics["epoch_starts_timed"] == 1


def test_the_target_reached_closes_the_window_at_that_evaluation(clock, tmp_path):
    metrics, m = play(clock, tmp_path, epochs=3, target=0.8, accuracies=(0.5, 0.85, 0.95))
    assert m.epochs == 2 and m.reached  # the third epoch never ran
    assert metrics["steps_timed"] == 6 and metrics["window_s"] == pytest.approx(6 * 1.5)
    assert metrics["val_acc"] == 0.85


def test_no_warm_up_times_every_step_and_has_no_first_step_apart(clock, tmp_path):
    metrics, _ = play(clock, tmp_path, warmup=0, first=1.0)
    assert metrics["steps_timed"] == 8 and metrics["first_step_s"] is None
    assert metrics["window_s"] == pytest.approx(8 * 1.5)


def test_the_memory_peaks_are_the_windows_and_leave_the_evaluations_out(clock, tmp_path, monkeypatch):
    """The warm-up (cuDNN's autotuning) and every evaluation (its odd last batch, a new shape) can use more memory
    than a training step: the record holds the window's peak alone, the highest of its stretches, and the cache the
    warm-up left is given back before its last step."""
    memory = Memory()
    monkeypatch.setattr(meter.Meter, "devices", lambda self: ["gpu0"])
    monkeypatch.setattr(meter, "peak_memory_mib", lambda device: (memory.peak, memory.reserved))
    monkeypatch.setattr(meter.torch.cuda, "reset_peak_memory_stats", memory.reset)
    monkeypatch.setattr(meter.torch.cuda, "empty_cache", memory.empty_cache)
    args = types.SimpleNamespace(warmup_steps=2, metrics_out=str(tmp_path / "m.json"), no_progress=True,
                                 target_accuracy=None, tensorboard=None, memory_snapshot=None, profile=None,
                                 loader="torchvision", model="m", workers=0, seed=0, eval_samples=None,
                                 optimizer="sgd")  # fmt: skip
    info = types.SimpleNamespace(dataset="generated", image_size=16, num_classes=10, loader="torch", train_size=32,
                                 val_size=40, dali_version=None)  # fmt: skip
    m = meter.Meter(args, torch.device("cpu"))
    m.start(info, 8, 3 * 4)
    used = {0: [900, 100, 100, 100], 1: [100, 250, 100, 100], 2: [100, 100, 180, 100]}  # per epoch, per step (MiB)
    for epoch in m.until_target(range(3)):
        for step in range(4):
            m.batch()
            memory.use(used[epoch][step])  # the first step's 900: a warm-up step, before the window
            clock.advance(1.0)
            m.step(torch.tensor(1.0))
        m.pause()
        memory.use(700)  # the evaluation
        m.evaluated(0.5, 40)
    m.finish()
    metrics = json.loads((tmp_path / "m.json").read_text())
    # reserved: the first step's 900 MiB cached were given back before the last warm-up step (once, outside the
    # window); what an evaluation inside the window leaves cached stays (giving it back would cost the timed steps)
    assert metrics["peak_mem_allocated_mib"] == 10 + 250 and metrics["peak_mem_reserved_mib"] == 10 + 700
    assert memory.emptied == 1


def test_the_steps_an_fp16_scaler_skipped_are_counted_and_none_without_one(clock, tmp_path):
    """A GradScaler skips the update of a step whose gradients hold inf (fp16's overflow): the meter counts the steps
    whose optimizer step did not run (a hook on the optimizer), warm-up included; a run without a scaler, or with one
    switched off (bf16), records none."""
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4)

    def step(at):  # steps 0 and 5 overflow
        scale = math.inf if at in (0, 5) else 1.0
        scaler.scale((weight * scale).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()

    metrics, _ = play(clock, tmp_path, before=lambda m: m.count_skipped_steps(scaler, optimizer), each_step=step)
    assert metrics["amp_skipped_steps"] == 2 and scaler.get_scale() == 2.0**2  # backed off twice
    off = torch.amp.GradScaler("cpu", enabled=False)
    metrics, _ = play(clock, tmp_path, before=lambda m: m.count_skipped_steps(off, optimizer))
    assert metrics["amp_skipped_steps"] is None
    assert play(clock, tmp_path)[0]["amp_skipped_steps"] is None


def event(name, start, end, thread=1, device="DeviceType.CPU", annotation=False):
    """A profiler event as torch.profiler's events() gives it: its name, time range (us), thread and device."""
    span = types.SimpleNamespace(start=start, end=end)
    return types.SimpleNamespace(
        name=name, time_range=span, thread=thread, device_type=device, is_user_annotation=annotation
    )


def test_a_collectives_time_and_its_time_with_no_compute_beside_it():
    """On a CPU, gloo's work on threads of its own against every operator (nested ones once; the profiler's step range
    and user annotations, which span the step, do not count as compute); on a GPU NCCL's kernels against the other
    kernels, the CPU's operators left out. Two steps: per step, in ms."""
    cpu = [
        event("ProfilerStep#3", 0, 10_000),  # the whole step: not compute
        event("DistributedDataParallel.forward", 0, 10_000, annotation=True),
        event("aten::convolution_backward", 1_000, 5_000),
        event("aten::mkldnn_convolution", 2_000, 3_000),  # inside the one above: counted once
        event("aten::broadcast_tensors", 2_500, 2_600),  # compute, whatever its name says
        event("c10d::allreduce_", 4_000, 4_500),  # the enqueue, on the training thread
        event("gloo:all_reduce", 4_000, 8_000, thread=2),  # 1 ms beside the backward, then 3 ms alone
        event("gloo:all_reduce", 7_000, 9_000, thread=3),  # a second bucket, alongside: 1 ms more alone
        event("aten::add_", 8_500, 10_000),  # the optimizer: 0.5 ms beside the second
    ]
    busy, exposed = meter.collective_time(cpu, steps=2)
    assert busy == pytest.approx(5_000 / 1e3 / 2) and exposed == pytest.approx(3_500 / 1e3 / 2)
    gpu = [
        event("aten::convolution_backward", 0, 9_000),  # the CPU's: not a kernel, left out on a GPU
        event("sm90_xmma_gemm", 0, 2_000, device="DeviceType.CUDA"),
        event("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1_000, 4_000, device="DeviceType.CUDA"),
    ]
    assert meter.collective_time(gpu, steps=1) == (pytest.approx(3.0), pytest.approx(2.0))
    assert meter.collective_time(cpu[:4], steps=2) == (None, None)  # no collective: nothing to say


def test_a_target_accuracy_with_nothing_evaluated_is_one_line(tiny_data, tmp_path):
    """--target-accuracy is read at each evaluation: --eval-samples 0 evaluates nothing, so the run would train on
    without a word; it is refused before any work (the meter declares both rules)."""
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--eval-samples", 0, "--target-accuracy", 0.5)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and m is None, result.stderr
    assert "--target-accuracy is read at each evaluation: with --eval-samples 0 nothing is evaluated" in result.stderr

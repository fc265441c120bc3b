"""The timed window (meter.py), in-process with a made-up clock: every second below is exact. A run of a script is
played as the training loop calls the meter (start, batch, step, pause, evaluated, finish), with known waits for the
data, known compute per step, an evaluation between epochs and a slow first step (a compile), and the record is
checked against the arithmetic: the warm-up and the evaluations are left out, the first step is timed apart, the
wait for data is the data wait, epoch starts inside the window are counted, throughput is samples / seconds."""

import json
import math
import sys
import types

import pytest
import torch

from helpers import ROOT

sys.path.insert(0, str(ROOT))
import meter  # noqa: E402


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
         target=None, accuracies=(0.5, 0.9), before=None, each_step=None):  # fmt: skip
    """The loop of train.py against the meter: (the metrics written, the meter). before(meter): what a technique
    tells the meter before the loop; each_step(step): a technique's step (before the meter's)."""
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
        for _ in range(per_epoch):
            clock.advance(wait)  # the host waits for the batch
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

"""bench/stages/records/profiles.py: the operators read per step, kernels apart, and the largest changes named
by kind."""

import types

import meter
from bench.stages.records import profiles


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

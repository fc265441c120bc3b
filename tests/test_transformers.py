"""What transformers are trained with: a small ViT that learns, the optimizer flag, FSDP2 against DDP, the fused step,
reduced-precision fp32 math, FLOPs and MFU in every run, and the bench's vit workload."""

import json

import pytest
import torch

import checks
import meter
from bench import catalogue, cli
from bench.outputs import markdown
from bench.stages import cost, plan
from helpers import (
    CPU_CLASSES,
    SMALL_MODEL,
    STEADY,
    TINY_MODEL,
    check_clean_failure,
    fast_first,
    run,
    scaled,
    told,
    train,
    verdicts,
)

VIT = "examples/vit_small.py:vit_small"
SYNTHETIC = ("--data", "synthetic:32:10")  # the ViT's 32 px, made on the device: no loader to wait for
SHORT = ("--steps", "6", "--warmup-steps", "2", "--batch-size", "8", "--workers", "0", "--eval-samples", "16")
TORCHRUN_NPROC = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node")


# ----------------------------------------------------------------------------- FLOPs and MFU (meter.py)


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


def gpu_run(name, amp=None, matmul="fp32", conv="tf32"):
    return dict(device="cuda", device_name=name, amp_dtype=amp, matmul_precision=matmul, conv_precision=conv)


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


# ----------------------------------------------------------------------------- the variants' own checks


def test_a_device_without_tf32_or_native_bf16_says_so_and_stays_fp32(monkeypatch, capsys):
    monkeypatch.setattr(checks, "native_bf16", lambda device: False)
    assert checks.reduced_precision(torch.device("cpu"), is_main=True) is None
    assert "matmuls and convolutions stay in fp32" in capsys.readouterr().err
    monkeypatch.setattr(checks, "native_bf16", lambda device: True)
    assert checks.reduced_precision(torch.device("cpu"), is_main=True) == "bf16"


def test_no_fused_step_is_one_line(monkeypatch, capsys):
    def refuses(*args, fused=None, **kwargs):
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices")

    monkeypatch.setattr(torch.optim, "AdamW", refuses)
    with pytest.raises(SystemExit) as done:
        checks.check_fused("adamw", torch.device("cpu"))
    said = capsys.readouterr().err.strip()
    assert done.value.code == 2 and len(said.splitlines()) == 1
    assert f"torch {torch.__version__} has no fused refuses step on the cpu" in said and "supported devices" in said
    checks.check_fused("sgd", torch.device("cpu"))  # this torch has one: no error


@pytest.mark.torches
@pytest.mark.parametrize("cpu", fast_first(["bf16", "avx2"]))
def test_the_tf32_and_fused_scripts_record_what_they_changed(tmp_path, cpu):
    """On a CPU with native bf16 the tf32 row's fp32 matmuls run in bf16 (oneDNN); on one without, the row does not
    apply and stays fp32: each class taken here (CPUINFO_FLAGS), whatever this machine is."""
    native, env = cpu == "bf16", {"CPUINFO_FLAGS": CPU_CLASSES[cpu]}
    result, m = train("train_tf32.py", SYNTHETIC[1], tmp_path / "t.json", "--model", SMALL_MODEL, *SHORT, env=env)
    assert result.returncode == 0, result.stderr
    assert m["matmul_precision"] == ("bf16" if native else "fp32") and m["variant"] == "tf32"
    assert ("does not apply here" in result.stderr) != bool(native) or "stay in fp32" in result.stderr
    result, m = train("train_fused.py", SYNTHETIC[1], tmp_path / "f.json", "--model", VIT, "--optimizer", "adamw",
                      *SHORT)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert m["fused_step"] is True and m["optimizer"] == "adamw" and "AdamW (fused step)" in result.stdout


def test_a_bad_optimizer_is_one_line(tiny_data, tmp_path):
    result, _ = train("train.py", tiny_data, tmp_path / "m.json", "--optimizer", "adam")
    check_clean_failure(result, tmp_path / "m.json")
    assert "--optimizer: invalid choice: 'adam'" in result.stderr


# ----------------------------------------------------------------------------- the ViT: it learns, every variant runs


@pytest.mark.slow
def test_the_small_vit_learns_with_adamw(small_data, tmp_path):
    result, m = train("train.py", small_data, tmp_path / "m.json", "--model", VIT, "--optimizer", "adamw",
                      "--steps", "40", "--batch-size", "32", "--eval-samples", "all")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert m["val_acc"] > 0.4, m["val_curve"]  # chance: 0.1
    assert m["flop_per_step"] > 1e9 and m["optimizer"] == "adamw"


@pytest.mark.slow
@pytest.mark.parametrize("script,field,value", [("train_checkpoint.py", "checkpoint_segments", 6),
                                                ("train_channels_last.py", "memory_format", "channels_last"),
                                                ("train_amp.py", "amp_dtype", "bf16")])  # fmt: skip
def test_the_variants_run_on_the_vit(script, field, value, tmp_path):
    """checkpoint wraps the 6 encoder blocks; channels_last runs (a ViT has one convolution, its patches)."""
    result, m = train(script, SYNTHETIC[1], tmp_path / "m.json", "--model", VIT, "--optimizer", "adamw", *SHORT)
    assert result.returncode == 0, result.stderr
    assert m[field] == value


# ----------------------------------------------------------------------------- FSDP2 (train_fsdp.py)


def fsdp(tmp_path, name, *args, nproc=2, script="train_fsdp.py"):
    metrics = tmp_path / f"{name}.json"
    cmd = [*TORCHRUN_NPROC, nproc, script, "--device", "cpu", "--metrics-out", metrics, "--no-progress", *args]
    return run(*cmd, timeout=300), metrics


@pytest.mark.slow
def test_fsdp_trains_as_ddp_does_and_evaluates_uneven_shards_exactly(tmp_path):
    """The same steps as DDP at 2 processes: the same losses (sharding changes where the math runs, not the math; each
    process seeds its own weights, so both start from rank 0's);
    5 validation images over 2 processes of 2-image batches: 2 batches on one, 1 on the other, each counted once."""
    flags = ("--data", "synthetic:32:10", "--model", VIT, "--optimizer", "adamw", "--steps", "6", "--warmup-steps", "2",
             "--batch-size", "4", "--workers", "0", "--eval-samples", "5")  # fmt: skip
    done, path = fsdp(tmp_path, "fsdp", *flags)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "FSDP over 7 units: 2 processes over gloo" in done.stdout  # 6 encoder blocks, then the root
    sharded = json.loads(path.read_text())
    done, path = fsdp(tmp_path, "ddp", *flags, script="train_ddp.py")
    assert done.returncode == 0, done.stderr[-2000:]
    replicated = json.loads(path.read_text())
    assert sharded["variant"] == "fsdp" and sharded["world_size"] == 2 and sharded["fsdp_units"] == 7
    assert sharded["val_samples"] == replicated["val_samples"] == 5
    losses = ("train_loss_first", "train_loss_final")  # rank 0's weights in both
    assert [sharded[k] for k in losses] == pytest.approx([replicated[k] for k in losses], rel=1e-3)
    assert sharded["val_acc"] == replicated["val_acc"]
    assert sharded["flop_per_step"] == pytest.approx(replicated["flop_per_step"], rel=0.01)


@pytest.mark.torches
def test_fsdp_processes_start_from_rank_0s_weights(tmp_path):
    """Each process seeds its own weights (--seed + rank): FSDP's shards must all be cut from rank 0's, as DDP's
    replicas are copied from it, or the model is a patchwork of two and learns worse (it did, until a bench caught
    it). Two processes of each, forked from one interpreter (tests/pair.py, not torchrun: seconds less): the same
    losses and accuracy."""
    flags = ("--device", "cpu", "--data", "synthetic:32:10", "--model", TINY_MODEL, "--steps", 6, "--warmup-steps", 1,
             "--batch-size", 8, "--workers", 0, "--eval-samples", 8, "--no-progress", "--lr", 0.5)  # fmt: skip
    runs = {}
    for script in "train_fsdp.py", "train_ddp.py":
        result = run("tests/pair.py", script, *flags, "--metrics-out", tmp_path / script)
        assert result.returncode == 0, result.stderr[-2000:]
        runs[script] = json.loads((tmp_path / script).read_text())
    sharded, replicated = runs["train_fsdp.py"], runs["train_ddp.py"]
    assert sharded["world_size"] == replicated["world_size"] == 2 and sharded["fsdp_units"] == 3
    losses = ("train_loss_first", "train_loss_final")
    assert [sharded[k] for k in losses] == pytest.approx([replicated[k] for k in losses], rel=1e-4)
    assert sharded["val_acc"] == replicated["val_acc"]


@pytest.mark.slow
def test_fsdp_bad_input_and_what_it_says(tiny_data, tmp_path):
    done, path = fsdp(tmp_path, "odd", "--data", tiny_data, "--batch-size", "5", "--steps", "3")
    assert done.returncode != 0 and "--batch-size 5 does not split evenly over 2 processes" in done.stderr
    assert not path.exists()
    done, path = fsdp(tmp_path, "root", "--data", tiny_data, "--model", "alexnet", "--steps", "3", "--warmup-steps",
                      "1", "--batch-size", "4", "--workers", "0", "--eval-samples", "4", nproc=1)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "has no blocks to shard one by one: the root alone is sharded" in done.stderr
    alone = train("train_fsdp.py", tiny_data, tmp_path / "m.json", "--steps", "3", "--warmup-steps", "1")[0]
    assert alone.returncode == 0 and "not launched by torchrun: one process, unsharded" in alone.stderr


# ----------------------------------------------------------------------------- the summary: FSDP against DDP, tf32


def test_fsdp_is_answered_against_ddp_at_the_same_processes():
    said, summary = verdicts(
        {
            "baseline": STEADY,
            "ddp": scaled(1.2, memory=2000, world_size=2),
            "fsdp": scaled(1.0, memory=1600, world_size=2),
        }
    )
    assert summary.loc["fsdp", "peer"] == "ddp" and pd_isna(summary.loc["ddp", "peer"])
    assert summary.loc["fsdp", "speedup_vs_peer"] == pytest.approx(1 / 1.2)
    assert summary.loc["fsdp", "memory_vs_peer"] == pytest.approx(0.8)
    assert "Against ddp (the same 2 processes and global batch): 0.83x the speed, slower (" in said["fsdp"]
    assert "0.80x the memory per process, less (" in said["fsdp"]


def pd_isna(value):
    return value is None or value != value


def test_tf32_that_changed_nothing_does_not_apply_here():
    said, summary = told({"baseline": STEADY, "tf32": scaled(1.0, matmul_precision="fp32", device="cpu")})
    assert said["Does not apply here"] == "tf32: this CPU has neither TF32 nor native bf16, so it ran fp32"
    row = summary.reset_index().iloc[1]
    assert markdown.label(row) == "tf32 (does not apply here)" and markdown.answer_cell(row) == "does not apply here"
    applied, _ = told({"baseline": STEADY, "tf32": scaled(0.6, matmul_precision="bf16", device="cpu")})
    assert "Does not apply here" not in applied and applied["Costs"].startswith("tf32 0.60x")


# ----------------------------------------------------------------------------- the bench's vit workload


@pytest.mark.usefixtures("described")
def test_the_vit_workload_runs_the_transformer_techniques_and_a_gpu_plan_keeps_its_budget(tmp_path):
    args = cli.parse_args(["--workload", "vit", "--dry-run", "--out", str(tmp_path)])
    runs, works, _ = plan.make_plan(args, 0, 2, dry_run=True)
    rows = {r.variant for r in runs}
    assert rows == {"synthetic", "amp-synthetic", "baseline", "amp", "tf32", "fused", "compile", "all", "checkpoint",
                    "ddp", "fsdp"}  # fmt: skip
    assert all("--optimizer" in r.cmd and VIT in r.cmd for r in runs) and works["vit"].data.endswith("small")
    small, _, _ = plan.make_plan(cli.parse_args(["--dry-run", "--out", str(tmp_path)]), 0, 2, dry_run=True)
    assert not {r.variant for r in small} & catalogue.TRANSFORMER_ONLY  # a CNN's default bench is as it was
    gpu, works, fit = plan.make_plan(cli.parse_args(["--dry-run", "--out", str(tmp_path)]), 1, 16, dry_run=True)
    assert list(works) == ["imagenet", "vit"] and works["vit"].model == "vit_b_16"
    assert fit.rounds >= 2 and fit.total_s <= cost.BUDGET_MIN["gpu"] * 60 and not fit.left_out
    assert {r.variant for r in gpu if r.workload == "vit"} >= {"fsdp", "fused", "tf32", "ddp"}

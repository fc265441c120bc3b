"""train_ddp.py without torchrun: one process, its GPU, SyncBatchNorm, and the pause after destroy_process_group that
every distributed script keeps."""

import ast

import pytest
import torch

from helpers import ROOT, join_stubbed, train


@pytest.mark.torches
@pytest.mark.parametrize("local_rank,gpus,expected", [(0, 1, 0), (2, 4, 2), (3, 8, 3)])
def test_each_ddp_process_takes_its_gpu(tiny_data, monkeypatch, local_rank, gpus, expected):
    """Local rank N takes GPU N, bound at init (more processes than GPUs: tests/bench/stages/planning/test_plan.py)."""
    calls = join_stubbed(monkeypatch, tiny_data, gpus, local_rank, gpus)
    assert calls["set_device"] == torch.device("cuda", expected)
    assert calls["backend"] == "nccl" and calls["device_id"] == torch.device("cuda", expected)


def test_without_torchrun_it_trains_as_one_process(tiny_data, tmp_path):
    result, m = train("train_ddp.py", tiny_data, tmp_path / "m.json", "--steps", 4, "--warmup-steps", 1)
    assert result.returncode == 0, result.stderr
    assert m["world_size"] == 1 and m["variant"] == "ddp" and m["val_samples"] == 40


def test_sync_bn_on_one_process(tiny_data, tmp_path):
    result, m = train("train_ddp.py", tiny_data, tmp_path / "m.json", "--steps", 3, "--warmup-steps", 1, "--sync-bn")
    assert result.returncode == 0, result.stderr
    assert m["sync_bn"] is True


def test_every_distributed_script_pauses_after_leaving_its_group(monkeypatch):
    """Each destroy_process_group() in a script is followed at once by checks.let_the_group_workers_finish(), and that
    sleeps: without the pause a gloo worker is stopped mid-collective as the process exits (SIGABRT in 4 to 6 jobs of
    30 over gloo here without it: too rare for a few jobs to show every time, see tests/e2e/test_torchrun.py)."""
    import checks

    leaving = {}
    for path in sorted(ROOT.glob("train*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            body = getattr(node, "body", None)
            for i, statement in enumerate(body if isinstance(body, list) else []):
                if isinstance(statement, ast.Expr) and ast.unparse(statement).endswith("destroy_process_group()"):
                    after = ast.unparse(body[i + 1]) if i + 1 < len(body) else "nothing"
                    leaving.setdefault(path.name, []).append(after)
    assert set(leaving) == {"train_ddp.py", "train_fsdp.py", "train_all.py"}
    assert all(after == ["checks.let_the_group_workers_finish()"] for after in leaving.values()), leaving
    slept = []
    monkeypatch.setattr(checks.time, "sleep", slept.append)
    checks.let_the_group_workers_finish()
    assert slept == [checks.EXIT_GRACE_S] and checks.EXIT_GRACE_S > 0

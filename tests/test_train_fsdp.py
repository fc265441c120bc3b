"""train_fsdp.py: every process starts from rank 0's weights."""

import json

import pytest

from helpers import (
    TINY_MODEL,
    run,
)


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

"""bench/stages/planning/slurm.py: rows fill one node then whole nodes, srun with one torchrun agent per node, what a
job cannot hold is one line."""

import os
import socket

import pytest

from bench import BenchError
from bench.stages.planning import slurm
from bench.stages.planning.planned import Run
from helpers import run

CORES = len(os.sched_getaffinity(0))  # a CPU node's processes: the cores the bench may use (machine.json's cpu_cores)


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--nodes", 2, "--scaling", "1,2"], "--nodes 2: job 7 has 1 node(s)"),
        (["--scaling", "1,4"], f"--scaling 4: 2 nodes of {CORES} processes, and the allocation has 1"),
        (["--scaling", "1,3"], f"--scaling 3: across nodes a count fills whole nodes of {CORES}"),
    ],
)
def test_what_the_job_cannot_hold_is_one_line(flags, words, tiny_data, tmp_path, monkeypatch):
    """Inside a job's batch script (Slurm's variables as sbatch sets them; scontrol and srun stand-ins that name one
    node, this one): the counts the allocation cannot hold are refused before anything runs. The real Slurm runs the
    dry run above."""
    node = socket.gethostname().split(".")[0]
    tools = tmp_path / "bin"
    tools.mkdir()
    for name, text in ("scontrol", f"#!/bin/sh\necho {node}\n"), ("srun", "#!/bin/sh\nexit 1\n"):
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", node)
    monkeypatch.setenv("SLURMD_NODENAME", node)
    monkeypatch.delenv("SLURM_STEP_ID", raising=False)
    result = run(
        "-m", "bench", "--launcher", "slurm", *flags, "--data", tiny_data, "--dry-run", "--out", tmp_path / "o"
    )
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--launcher", "slurm"], "--launcher slurm runs inside a Slurm allocation: submit it with sbatch"),
        (["--nodes", 2], "--nodes goes with --launcher slurm"),
        (["--launcher", "slurm", "--nodes", 0], "--nodes 0: 1 or more"),
        (["--launcher", "slurm", "--max-batch"], "--launcher goes with a bench or --scaling, not --max-batch"),
        (["--launcher", "ssh"], "invalid choice: 'ssh'"),
    ],
)
def test_bad_flags_outside_a_job_are_one_line(flags, words, tmp_path, monkeypatch):
    for name in [n for n in os.environ if n.startswith("SLURM")]:  # outside a job, wherever the tests run
        monkeypatch.delenv(name)
    result = run("-m", "bench", *flags, "--dry-run", "--out", tmp_path / "o", timeout=120)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_rows_fill_one_node_then_whole_nodes():
    assert slurm.spread(1, 8, 2) == (1, 1) and slurm.spread(8, 8, 2) == (1, 8) and slurm.spread(16, 8, 2) == (2, 8)
    for processes, words in [(12, "whole nodes of 8"), (24, "3 nodes of 8 processes, and the allocation has 2")]:
        with pytest.raises(BenchError, match=words):
            slurm.spread(processes, 8, 2)


def test_a_row_on_two_nodes_is_srun_with_one_torchrun_agent_per_node_joined_by_c10d(monkeypatch):
    local = ["/py", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "8", "train_ddp.py", "--x", "1"]
    planned = slurm.on_nodes(Run("n16-ddp-1", "ddp", "train", 1, 8, local), 2)
    assert planned.processes == 16 and planned.nodes == 2 and planned.cmd == local
    monkeypatch.delenv("RDZV_PORT", raising=False)
    found = dict(job="77", hosts=["gpu-a", "gpu-b", "gpu-c"], cpus="32")
    assert slurm.command(planned, found) == [
        *("srun", "--nodes", "2", "--ntasks", "2", "--ntasks-per-node", "1", "--nodelist", "gpu-a,gpu-b"),
        *("--kill-on-bad-exit=1", "--cpus-per-task", "32", "/py", "-m", "torch.distributed.run", "--nnodes", "2"),
        *("--nproc-per-node", "8", "--rdzv-backend", "c10d", "--rdzv-endpoint", "gpu-a:29500"),
        *("--rdzv-id", "77-n16-ddp-1", "train_ddp.py", "--x", "1"),
    ]
    monkeypatch.setenv("RDZV_PORT", "31000")
    assert "gpu-a:31000" in slurm.command(planned, dict(found, cpus=None))
    assert "--cpus-per-task" not in slurm.command(planned, dict(found, cpus=None))

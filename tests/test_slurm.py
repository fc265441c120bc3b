"""python -m bench --launcher slurm (bench/slurm.py): the DDP rows through srun + torchrun (c10d) on the job's
nodes. For real on a one-node Slurm (tests/slurm_cluster.py, Debian's slurm-wlm and munge): the shipped
slurm/bench.sbatch, submitted with sbatch, runs the scaling mode on the CPU with gloo; a dry run inside the job
shows the commands; the flags fail in one line outside a job and inside one. How rows are placed on nodes and the
srun + torchrun command, on a plan made up for 2 nodes of 8 GPUs."""

import json
import os
import re
import socket
import subprocess
import sys

import pandas as pd
import pytest
import slurm_cluster

from bench import BenchError, slurm
from bench.plan import Run
from helpers import PY, ROOT

FLAGS = ["--steps", 4, "--warmup-steps", 1, "--batch-size", 8, "--workers", 0, "--eval-samples", 8]
FLAGS += ["--model", "examples/smallnet.py:tiny"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The one-node Slurm, up for this module's tests; a test fails in one line when it cannot come up."""
    folder = tmp_path_factory.mktemp("slurm")
    try:
        with slurm_cluster.one_node(folder) as env:
            yield env, folder
    except slurm_cluster.Unavailable as e:
        pytest.fail(f"the one-node Slurm did not come up: {e}", pytrace=False)


def in_job(cluster, *args, timeout=300):
    """python -m bench ARGS as the one task of a one-node job (srun makes the allocation and runs it there)."""
    env, _ = cluster
    cmd = ["srun", "--nodes", "1", "--ntasks", "1", "--cpus-per-task", str(os.cpu_count()), PY, "-m", "bench"]
    cmd += [str(a) for a in args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_the_sbatch_file_runs_the_scaling_bench_through_srun_and_torchrun(cluster, tiny_data, tmp_path):
    """slurm/bench.sbatch as shipped (only its GPUs and cores set to this machine's): every DDP row is a job step
    (srun), its torchrun joins by c10d, and every rank of each count takes part (the world size)."""
    env, folder = cluster
    out, job_out = tmp_path / "out", tmp_path / "job.out"
    cmd = ["sbatch", "--wait", "--nodes", "1", "--gpus-per-node", "0", "--cpus-per-task", str(os.cpu_count())]
    cmd += ["--output", str(job_out), "slurm/bench.sbatch", "--scaling", "1,2", "--variants", "ddp", "--repeats", "1"]
    cmd += ["--data", str(tiny_data), "--out", str(out), *map(str, FLAGS)]
    submitted = subprocess.run(cmd, cwd=ROOT, env={**env, "PY": PY}, capture_output=True, text=True, timeout=600)
    log = job_out.read_text() if job_out.exists() else ""
    assert submitted.returncode == 0, submitted.stderr + log
    job = re.search(r"Submitted batch job (\d+)", submitted.stdout).group(1)
    table = pd.read_csv(out / "scaling.csv")
    assert list(table["processes"]) == [1, 2] and list(table["rounds_ok"]) == [1, 1], log
    assert (table["samples_per_s"] > 0).all() and list(table["nodes"]) == [1, 1]
    (logs,) = (out / "logs").iterdir()
    metrics = [json.loads(p.read_text()) for p in sorted((logs / "scaling").glob("*.json"))]
    assert sorted(m["world_size"] for m in metrics) == [1, 2]  # all ranks joined: their gather went round
    assert sorted(m["global_batch_size"] for m in metrics) == [8, 16]
    steps = re.findall(rf"launch task StepId={job}\.(\d+) ", (folder / "slurmd.log").read_text())
    assert sorted(set(steps)) == ["0", "1"]  # one job step (srun) per DDP row, none for anything else
    assert table["memory_per_process_mib"].isna().all()  # under srun the bench sees none of their memory


@pytest.mark.slow
def test_a_dry_run_in_a_job_shows_srun_for_ddp_rows_only_and_bad_placements_fail(cluster, tiny_data, tmp_path):
    node = socket.gethostname().split(".")[0]
    shown = in_job(cluster, "--launcher", "slurm", "--variants", "baseline,ddp", "--loaders", "none", "--data",
                   tiny_data, "--dry-run", "--out", tmp_path / "o", "--repeats", 1)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if line.startswith(sys.executable)]
    lines += [line for line in shown.stdout.splitlines() if line.startswith("srun ")]
    (baseline,) = [line for line in lines if "train.py" in line]
    (ddp,) = [line for line in lines if "train_ddp.py" in line]
    assert baseline.startswith(sys.executable) and "srun" not in baseline  # single-process rows: where the bench is
    assert ddp.startswith(f"srun --nodes 1 --ntasks 1 --ntasks-per-node 1 --nodelist {node} --kill-on-bad-exit=1")
    assert f"--nnodes 1 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint {node}:29500" in ddp
    assert "--standalone" not in ddp
    for flags, words in [
        (["--launcher", "slurm", "--nodes", 2, "--scaling", "1,2"], "--nodes 2: job"),
        (["--launcher", "slurm", "--scaling", "1,4"], "--scaling 4: 2 nodes of 2 processes, and the allocation"),
        (["--launcher", "slurm", "--scaling", "1,3"], "--scaling 3: across nodes a count fills whole nodes of 2"),
    ]:
        result = in_job(cluster, *flags, "--data", tiny_data, "--dry-run", "--out", tmp_path / "o")
        assert result.returncode == 2 and words in result.stderr, (flags, result.stderr)
        own = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("srun: ")]
        assert len(own) == 1 and "Traceback" not in result.stderr  # srun adds a line of its own: the exit code


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--launcher", "slurm"], "--launcher slurm runs inside a Slurm allocation: submit it with sbatch"),
        (["--nodes", 2], "--nodes goes with --launcher slurm"),
        (["--launcher", "slurm", "--nodes", 0], "--nodes 0: 1 or more"),
        (["--launcher", "slurm", "--max-batch"], "--launcher slurm goes with a bench or --scaling, not --max-batch"),
        (["--launcher", "ssh"], "invalid choice: 'ssh'"),
    ],
)
def test_bad_flags_outside_a_job_are_one_line(flags, words, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    result = subprocess.run([PY, "-m", "bench", *map(str, flags), "--dry-run", "--out", str(tmp_path / "o")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
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

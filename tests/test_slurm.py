"""python -m bench --launcher slurm (bench/stages/slurm.py): the DDP rows through srun + torchrun (c10d) on the job's
nodes. For real on a one-node Slurm (tests/slurm_cluster.py, Debian's slurm-wlm and munge): the shipped
slurm/bench.sbatch, submitted with sbatch, runs the scaling mode on the CPU with gloo; a dry run inside the job
shows the commands; the flags fail in one line outside a job and inside one. How rows are placed on nodes and the
srun + torchrun command, on a plan made up for 2 nodes of 8 GPUs."""

import json
import os
import re
import socket
import subprocess
import time

import pandas as pd
import pytest
import slurm_cluster

from bench import BenchError
from bench.stages import record, slurm
from bench.stages.plan import Run
from helpers import PY, ROOT, run

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


def submit(cluster, tmp_path, *args, timeout=600):
    """slurm/bench.sbatch ARGS, submitted as shipped but for its GPUs and cores (this machine's), waited for: the
    job's exit code, what it printed, and its id. Waited for by asking scontrol twice a second: `sbatch --wait` asks
    ever more seldom, up to every 10 s, and took 42 s for a job of 24."""
    env, _ = cluster
    log = tmp_path / f"job-{len(list(tmp_path.glob('job-*')))}.out"
    cmd = ["sbatch", "--parsable", "--nodes", "1", "--gpus-per-node", "0", "--cpus-per-task", str(os.cpu_count())]
    cmd += ["--output", str(log), "slurm/bench.sbatch", *map(str, args)]
    sent = subprocess.run(cmd, cwd=ROOT, env={**env, "PY": PY}, capture_output=True, text=True, timeout=60)
    assert sent.returncode == 0, sent.stderr
    job = sent.stdout.strip().split(";")[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = subprocess.run(["scontrol", "show", "job", job], env=env, capture_output=True, text=True).stdout
        state = re.search(r"JobState=(\w+)", shown)
        if state and state.group(1) not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            code, signal = map(int, re.search(r" ExitCode=(\d+):(\d+)", shown).groups())
            return code or (128 + signal if signal else 0), (log.read_text() if log.exists() else "") + sent.stderr, job
        time.sleep(0.5)
    raise AssertionError(f"job {job} still running after {timeout} s: {log.read_text() if log.exists() else ''}")


@pytest.mark.slow
def test_the_sbatch_file_runs_the_scaling_bench_through_srun_and_torchrun(cluster, tiny_data, tmp_path):
    """Every DDP row is a job step (srun), its torchrun joins by c10d, and every rank of each count takes part (the
    world size)."""
    out = tmp_path / "out"
    code, log, job = submit(cluster, tmp_path, "--scaling", "1,2", "--variants", "ddp", "--repeats", 1, "--data",
                            tiny_data, "--out", out, *FLAGS)  # fmt: skip
    assert code == 0, log
    table = pd.read_csv(out / "scaling.csv")
    assert list(table["processes"]) == [1, 2] and list(table["rounds_ok"]) == [1, 1], log
    assert (table["samples_per_s"] > 0).all() and list(table["nodes"]) == [1, 1]
    (logs,) = (out / "logs").iterdir()
    metrics = [json.loads(p.read_text()) for p in sorted((logs / "scaling").glob("*.json"))]
    assert sorted(m["world_size"] for m in metrics) == [1, 2]  # all ranks joined: their gather went round
    assert sorted(m["global_batch_size"] for m in metrics) == [8, 16]
    _, folder = cluster
    steps = re.findall(rf"launch task StepId={job}\.(\d+) ", (folder / "slurmd.log").read_text())
    assert sorted(set(steps)) == ["0", "1"]  # one job step (srun) per DDP row, none for anything else
    assert table["memory_per_process_mib"].isna().all()  # under srun the bench sees none of their memory


@pytest.mark.slow
def test_a_bench_in_a_job_runs_its_ddp_row_through_srun_and_the_rest_where_it_is(cluster, tiny_data, tmp_path):
    out = tmp_path / "out"
    code, log, _ = submit(cluster, tmp_path, "--variants", "baseline,ddp", "--loaders", "none", "--repeats", 1,
                          "--data", tiny_data, "--out", out, "--baseline-dir", tmp_path / "none", *FLAGS)  # fmt: skip
    assert code == 0, log
    rows = record.read_runs(out / "runs.csv").set_index("variant")
    assert list(rows["status"]) == ["ok", "ok"] and list(rows["world_size"]) == [1, 2]
    assert rows.loc["ddp", "command"].startswith("srun --nodes 1 ") and "c10d" in rows.loc["ddp", "command"]
    assert not rows.loc["baseline", "command"].startswith("srun")  # single-process rows: where the bench is
    assert pd.isna(rows.loc["ddp", "peak_host_mem_mib"]) and rows.loc["baseline", "peak_host_mem_mib"] > 0
    assert (out / "summary.csv").exists()


@pytest.mark.slow
def test_a_dry_run_in_a_job_shows_srun_and_what_the_job_cannot_hold_is_one_line(cluster, tiny_data, tmp_path):
    node = socket.gethostname().split(".")[0]
    flags = ["--scaling", "1,2", "--repeats", 1, "--data", tiny_data, "--dry-run", "--out", tmp_path / "o"]
    code, log, _ = submit(cluster, tmp_path, *flags)
    assert code == 0, log
    (two,) = [line for line in log.splitlines() if "ddp x2:" in line]
    assert f"srun --nodes 1 --ntasks 1 --ntasks-per-node 1 --nodelist {node} --kill-on-bad-exit=1" in two
    assert f"--nnodes 1 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint {node}:29500" in two
    assert "--standalone" not in two
    env, _ = cluster  # inside srun's own step, the rows' steps would wait for the CPUs it holds
    cmd = ["srun", "--nodes", "1", "--ntasks", "1", PY, "-m", "bench", "--launcher", "slurm", "--dry-run"]
    inside = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    own = [line for line in inside.stderr.splitlines() if not line.startswith("srun: ")]  # srun adds its exit code
    assert inside.returncode == 2 and len(own) == 1 and "not inside srun" in own[0], inside.stderr


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--nodes", 2, "--scaling", "1,2"], "--nodes 2: job 7 has 1 node(s)"),
        (["--scaling", "1,4"], f"--scaling 4: 2 nodes of {os.cpu_count()} processes, and the allocation has 1"),
        (["--scaling", "1,3"], f"--scaling 3: across nodes a count fills whole nodes of {os.cpu_count()}"),
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
        (["--launcher", "slurm", "--max-batch"], "--launcher slurm goes with a bench or --scaling, not --max-batch"),
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

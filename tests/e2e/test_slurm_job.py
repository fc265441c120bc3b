"""End to end: a one-node Slurm cluster runs the sbatch files and a bench's rows through srun."""

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import slurm_cluster

from bench.stages.records import record
from helpers import FLAGS, PY, ROOT, free_port

pytestmark = pytest.mark.xdist_group("slurm")  # one cluster, on one worker of make test's parallel pass

JOB_FLAGS = ["--steps", 4, "--warmup-steps", 1, "--batch-size", 8, "--workers", 0, "--eval-samples", 8]
JOB_FLAGS += ["--model", "examples/smallnet.py:tiny"]  # the bench's rows in a job


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """The one-node Slurm, up once for the tests that use it; a test fails in one line when it cannot come up."""
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
    # a job that runs its rows, a rendezvous port of its own (the bench's default, 29500, is what a dry run shows):
    # once a job's agent joined a store on 29500 that another process held and lost it (which process: not found)
    env = {**env, "PY": PY, **({} if "--dry-run" in args else {"RDZV_PORT": str(free_port())})}
    sent = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
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
def test_slurm_script_runs_with_srun(tiny_data, tmp_path):
    """slurm/train_ddp.sbatch, with stand-ins for srun (one task per node) and scontrol."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(
        '#!/bin/bash\npids=()\nfor i in $(seq "$SLURM_JOB_NUM_NODES"); do "$@" & pids+=($!); done\n'
        'rc=0\nfor p in "${pids[@]}"; do wait "$p" || rc=1; done\nexit $rc\n'
    )
    (bin_dir / "scontrol").write_text("#!/bin/bash\necho 127.0.0.1\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{Path(PY).parent}:{os.environ['PATH']}",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_JOB_ID": "42",
        "GPUS_PER_NODE": "1",
        "RDZV_PORT": str(free_port()),
        "REPO": str(ROOT),
    }
    metrics = tmp_path / "m.json"
    cmd = ["bash", ROOT / "slurm" / "train_ddp.sbatch", "--data", tiny_data, *FLAGS, "--steps", 3, "--warmup-steps", 1]
    result = subprocess.run([*map(str, cmd), "--metrics-out", str(metrics)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(metrics.read_text())["world_size"] == 2


@pytest.mark.slow
def test_the_sbatch_file_runs_the_scaling_bench_through_srun_and_torchrun(cluster, tiny_data, tmp_path):
    """Every DDP row is a job step (srun), its torchrun joins by c10d, and every rank of each count takes part (the
    world size)."""
    out = tmp_path / "out"
    code, log, job = submit(cluster, tmp_path, "--scaling", "1,2", "--variants", "ddp", "--repeats", 1, "--data",
                            tiny_data, "--out", out, *JOB_FLAGS)  # fmt: skip
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
                          "--data", tiny_data, "--out", out, "--baseline-dir", tmp_path / "none",
                          *JOB_FLAGS)  # fmt: skip
    assert code == 0, log
    rows = record.read_runs(out / "runs.csv").set_index("run")  # a CPU round: the baseline beside ddp too
    assert list(rows.index) == ["baseline-1", "ddp-1", "baseline-1.2"] and (rows["status"] == "ok").all()
    assert list(rows["world_size"]) == [1, 2, 1]
    assert rows.loc["ddp-1", "command"].startswith("srun --nodes 1 ") and "c10d" in rows.loc["ddp-1", "command"]
    assert not rows.loc["baseline-1", "command"].startswith("srun")  # single-process rows: where the bench is
    assert pd.isna(rows.loc["ddp-1", "peak_host_mem_mib"]) and rows.loc["baseline-1", "peak_host_mem_mib"] > 0
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

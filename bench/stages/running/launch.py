"""Launch one run as a subprocess with a time limit, sample its memory, and turn it into a row.

A run that exits non-zero, outlives its limit, or writes metrics that do not hold up becomes a
failed row with the reason; it never stops the bench. When the caller's `stop` event is set (its
Ctrl-C and SIGTERM handlers set it) the run's whole process tree is stopped and no row is made.
"""

import ctypes
import functools
import json
import math
import os
import resource
import shlex
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

import psutil

from bench import BenchError, schema
from bench.observe.machine import ROOT
from bench.observe.sample import Sampler
from bench.stages.cost import STEADY
from bench.stages.planning import slurm
from bench.stages.statistics import rules


def die_with_parent():
    """In the child, on Linux: get SIGTERM if the bench itself dies, even by SIGKILL."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def start_child(memory_limit_mib=None):
    """In the child: die with the parent; limit its address space if asked."""
    die_with_parent()
    if memory_limit_mib:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_mib << 20, memory_limit_mib << 20))


def start(cmd, log, env, memory_limit_mib=None):
    """The run's process, started as a user's shell starts it (a new interpreter), its output to log: what launch
    reads of it is its pid, poll() and wait() (the tests' benches put their own here: tests/forkserver.py)."""
    return subprocess.Popen(
        cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        preexec_fn=functools.partial(start_child, memory_limit_mib), env=env,
    )  # fmt: skip


def stop_tree(process, grace=5):
    """Terminate a process and all its descendants; kill what is left after `grace` seconds."""
    try:
        tree = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in tree:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(tree, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace)


def last_error(log_text):
    """The line that says what went wrong: the script's own `error:` line; else, where torchrun failed the job, the
    rank that failed first and how (its summary's root cause, and a process's abort message); else the last line
    that is not a rule of '=' or '-'."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    errors = [line for line in lines if ": error: " in line]
    if errors:
        return errors[-1][:500]
    words = [line for line in lines if not set(line) <= set("=-")]
    return (torchrun_root_cause(words) or (words or ["no output"])[-1])[:500]


def torchrun_root_cause(lines):
    """torchrun's summary of a failed job in one line ('rank 1 (local_rank: 1) failed: exitcode -6 (pid: 4242):
    Signal 6 (SIGABRT) received by PID 4242; terminate called without an active exception'), or None."""
    if "Root Cause (first observed failure):" not in lines:
        return None
    cause = {}
    for line in lines[lines.index("Root Cause (first observed failure):") + 1 :]:
        key, colon, value = line.partition(":")
        if colon and key.strip() in ("rank", "exitcode", "traceback"):
            cause.setdefault(key.strip(), value.strip())
    said = f"rank {cause.get('rank', '?')} failed: exitcode {cause.get('exitcode', '?')}"
    said += f": {cause['traceback']}" if cause.get("traceback") not in (None, "<N/A>") else ""
    aborts = [line for line in lines if line.startswith("terminate called") or "Fatal Python error" in line]
    return said + (f"; {aborts[0]}" if aborts else "")


def check_metrics(metrics, kind):
    """The reason metrics cannot be trusted, or None."""
    if not isinstance(metrics, dict):
        return "metrics are not a JSON object"
    for key in schema.required(kind):
        value = metrics.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            return f"metrics field {key} is {value!r}, not a positive number"
    return None


def gpus_of(run):
    """How many of the visible GPUs a run uses: DataParallel every one (None), else one per process."""
    return None if any(part.endswith("train_dp.py") for part in run.cmd) else run.processes


def launch(run, log_dir, timeout, stop, tensorboard=False, memory_limit_mib=None, profile=False):
    """Run `run` to the end or its time limit and return its row for runs.csv; None if `stop` was set.
    tensorboard: a training run writes its curves to log_dir/tensorboard/<run> too. memory_limit_mib: the address
    space of each of its processes (RLIMIT_AS, inherited by the processes it starts): a CPU's stand-in for a GPU's
    memory (python -m bench --max-batch). profile: a training run records the steps after its window
    (--profile), its trace beside its log (log_dir/<run>.pt.trace.json.gz)."""
    metrics_path, log_path = log_dir / f"{run.name}.json", log_dir / f"{run.name}.log"
    cmd = [*slurm.launched(run), "--metrics-out", str(metrics_path)]
    if tensorboard and run.kind == "train":
        cmd += ["--tensorboard", str(log_dir / "tensorboard" / run.name)]
    if profile and run.kind == "train":
        cmd += ["--profile", str(log_dir / f"{run.name}.pt.trace.json.gz")]
    row = dict(schema_version=schema.VERSION, run=run.name, variant=run.variant, kind=run.kind, repeat=run.repeat)
    row["command"] = shlex.join(cmd)
    row["threads"] = run.env.get("OMP_NUM_THREADS")  # set by the plan: the same cores for every row
    row["time_utc"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started, runner_cpu = time.perf_counter(), time.process_time()
    try:
        log = open(log_path, "w")
    except OSError as e:
        raise BenchError(f"cannot write {log_path}: {e.strerror or e}") from None
    with log:
        popen = start(cmd, log, {**os.environ, **run.env}, memory_limit_mib)
        process = psutil.Process(popen.pid)
        sampler = Sampler(popen.pid, gpu="cuda" in run.cmd, gpus=gpus_of(run))
        sampler.start()
        error = None
        while popen.poll() is None:
            if stop.wait(0.05) or time.perf_counter() - started > timeout:
                stop_tree(process)
                error = f"timed out after {timeout} s"
                break
        returncode = popen.wait()
        ended = time.time()
        row.update(sampler.stop())
        if run.nodes:  # the sampler saw srun alone: the processes run under Slurm's own daemons
            row.update(peak_host_mem_mib=None, nvml_peak_mib=None, nvml_method="not measured: run through srun")
        if stop.is_set():
            return None
    row.update(returncode=returncode, wall_s=time.perf_counter() - started)
    row["runner_cpu_s"] = time.process_time() - runner_cpu
    if error is None and returncode != 0:
        error = last_error(log_path.read_text(errors="replace"))
    if error is None:
        try:
            metrics = json.loads(metrics_path.read_text())
            error = check_metrics(metrics, run.kind)
        except (OSError, ValueError) as e:
            error = f"no readable metrics: {e}"
    if error is None:
        row.update({k: v for k, v in metrics.items() if k not in schema.JSON_ONLY | {"variant"}})
        if run.kind == "train":  # the counters of this machine: a run through srun may run on others
            row.update(sampler.window_fields(metrics) if not run.nodes else {"energy_source": "not measured: srun"})
        phases = [metrics.get(k) for k in ("setup_s", "warmup_s", "window_s", "eval_s")]
        if all(isinstance(p, (int, float)) for p in phases):  # training runs: where the rest of the time went
            row["other_s"] = row["wall_s"] - sum(phases)
        if isinstance(metrics.get("written_unix_s"), (int, float)):  # the record written to the process's end
            row["exit_s"] = max(0.0, ended - metrics["written_unix_s"])
        if run.kind == "train":  # the warm-up its steps needed (the next bench's plan may cut it to that)
            median = metrics.get("step_time_median_ms")
            row["warmup_steady_steps"] = rules.steady_after(metrics.get("warmup_step_ms"), median, STEADY)
        if metrics.get("step_time_median_ms") and metrics.get("global_batch_size"):  # the rate without the stalls
            row["median_step_samples_per_s"] = 1e3 * metrics["global_batch_size"] / metrics["step_time_median_ms"]
    row.update(status="failed" if error else "ok", error=error)
    return row

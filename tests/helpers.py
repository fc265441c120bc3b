"""What the tests share: running a script as a user would, tiny generated data, clean-failure checks."""

import json
import os
import re
import resource
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from bench import catalogue

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SMALL_MODEL = "shufflenet_v2_x0_5"  # learns in seconds on a CPU; BN momentum 0.1, so eval works early
# the smallest model, for the tests that compile or learn: a cold torch.compile of it takes seconds on 2 cores (of
# smallnet, half a minute; of shufflenet, a minute; CI starts with no compile cache), 3 epochs of small_data 7 s
# (shufflenet's: 17 s), and it learns them as well (0.885 here, shufflenet 0.95)
TINY_MODEL = f"{ROOT}/tests/tinynet.py:build"
LEARN = ("--epochs", 3, "--batch-size", 32, "--model", TINY_MODEL)  # on small_data: accuracy far above chance
# every way of training, as the command after `python`: each train*.py (train_ddp.py as one process,
# without torchrun), and the base with the DALI loader; bad input is tried on all of them
SCRIPTS = {"train": ("train.py",)} | {
    name: (catalogue.BY_NAME[name].script, *catalogue.BY_NAME[name].flags) for name in catalogue.tutorials()
}
LOADERS = tuple(row.script for row in catalogue.loaders().values())


def fast_first(values):
    """Parameters of which only the first runs in make test-fast; the others are marked slow (make test runs all).
    A tuple is the values of several parameters."""
    slow = [pytest.param(*v if isinstance(v, tuple) else (v,), marks=pytest.mark.slow) for v in values[1:]]
    return [*values[:1], *slow]


def run(*args, timeout=600, env=None, cwd=ROOT, memory_limit=None, file_limit=None):
    """Run `python ARGS...` the way a user would, from the repository root; return CompletedProcess.
    memory_limit: bytes of address space for it and the processes it starts (RLIMIT_AS);
    file_limit: the largest file they may write, in bytes (RLIMIT_FSIZE): a disk that fills up."""
    cmd = [PY, *map(str, args)]
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}

    def limit():
        if memory_limit:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        if file_limit:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    preexec = limit if memory_limit or file_limit else None
    bench = args[0] == "-m" and args[1] == "bench" and Path(cwd) == ROOT  # the server imported this bench/
    forkable = str(args[0]).endswith(".py") or bench  # see tests/forkserver.py
    if forkable and not preexec and FORKS.suits(full_env):
        return FORKS.run(cmd, cwd, full_env, timeout)
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env, preexec_fn=preexec
    )


class ForkServer:
    """`python SCRIPT.py ...` forked from a process that has imported torch already (tests/forkserver.py): the
    same run without seconds of imports. Used where the run's environment holds nothing an interpreter reads at
    its start that differs from the server's (READ_AT_START); TESTS_NO_FORKSERVER=1 turns it off."""

    # CUDA_VISIBLE_DEVICES is read where CUDA starts, in the child: the server never starts it
    READ_AT_START = re.compile(r"^(PYTHON|OMP_|MKL_|KMP_|LD_|TORCH|CUDA(?!_VISIBLE_DEVICES$)|NVIDIA|PYTORCH)")

    def __init__(self):
        self.process, self.started_env, self.buffer = None, None, b""

    def at_start(self, env):
        return {k: v for k, v in env.items() if self.READ_AT_START.match(k)}

    def suits(self, env):
        if os.environ.get("TESTS_NO_FORKSERVER"):
            return False
        if self.process is None or self.process.poll() is not None:
            self.started_env, self.buffer = {**os.environ, "PYTHONWARNINGS": "ignore"}, b""
            self.process = subprocess.Popen(
                [PY, str(ROOT / "tests" / "forkserver.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True, env=self.started_env, cwd=ROOT, bufsize=1,
            )  # fmt: skip
        return self.at_start(env) == self.at_start(self.started_env)

    def reply(self, timeout=None):
        """The server's next line, or None after timeout seconds (read from its pipe unbuffered: select sees all)."""
        fd, deadline = self.process.stdout.fileno(), None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("tests/forkserver.py ended")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, cmd, cwd, env, timeout):
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp) / "out", Path(tmp) / "err"
            request = dict(argv=[str(a) for a in cmd[1:]], cwd=str(cwd), env=env, out=str(out), err=str(err))
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = self.reply()["pid"]
            ended = self.reply(timeout)
            if ended is None:  # as subprocess.run does: the run is killed, TimeoutExpired raised
                for p in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
                    p.kill()
                self.reply()
                raise subprocess.TimeoutExpired(cmd, timeout, out.read_text(), err.read_text())
            text = dict(errors="replace")
            return subprocess.CompletedProcess(cmd, ended["status"], out.read_text(**text), err.read_text(**text))


FORKS = ForkServer()


def assert_no_orphans(marker):
    """No process whose command line holds marker (a path unique to the test) is left running."""
    left = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True).stdout.split()
    assert not left, f"orphan processes left: {left}"


def check_clean_failure(result, metrics, *words):
    """Exit code 2, one line on stderr holding every word, no traceback, no metrics file (or its .tmp). A run that
    started training said first, in a line of its own, when this CPU only emulates bf16 (train_amp.py, train_all.py):
    that warning is not the error, and is left out."""
    lines = [line for line in result.stderr.strip().splitlines() if "has no native bf16" not in line]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert str(word) in lines[0], lines[0]
    assert not metrics.exists() and not metrics.with_name(metrics.name + ".tmp").exists()


def build_loaders(module, data, batch_size, workers=1, seed=0, rank=0, world_size=1, eval_samples="all"):
    """A loader module's two steps (loader.py's or loader_dali.py's) as train.py takes them, on the CPU with no
    sampler: (train_loader, val_loader, info)."""
    import torch

    train_set, val_set, info = module.open_data(data)
    device = torch.device("cpu")
    loaders = module.build_loaders(train_set, val_set, info, batch_size, device, workers, seed, None, rank, world_size,
                                   eval_samples)  # fmt: skip
    return (*loaders, info)


def generate(out, train=12, val=4, size=16, seed=0):
    result = run("-m", "bench.data", out, "--train", train, "--val", val, "--size", size, "--seed", seed)
    assert result.returncode == 0, result.stderr
    return Path(out)


# the two classes of CPU the tests and CI meet, as /proc/cpuinfo lists their flags (the part that decides): set as
# CPUINFO_FLAGS (checks.cpu_flags, bench.observe.machine.cpu_flags), a test sees that class whatever this machine is
CPU_CLASSES = dict(avx2="fpu sse2 avx avx2 fma", bf16="fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_bf16")

TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", 2)  # two CPU processes (gloo)


def train(script, data, metrics, *args, timeout=600, env=None, file_limit=None, launcher=(), memory_limit=None):
    """Run a training script on data with the small model (under launcher, e.g. TORCHRUN, if given); return
    (CompletedProcess, metrics or None)."""
    cmd = [*launcher, script, "--data", data, "--model", SMALL_MODEL, "--metrics-out", metrics, "--no-progress"]
    cmd += ["--batch-size", 16, "--workers", 1, *args]  # later flags win
    result = run(*cmd, timeout=timeout, env=env, file_limit=file_limit, memory_limit=memory_limit)
    written = json.loads(Path(metrics).read_text()) if Path(metrics).is_file() else None
    return result, written

"""What the tests share: running a script as a user would, tiny generated data, clean-failure checks."""

import atexit
import hashlib
import importlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path

import forkserver  # the server's rule for what an interpreter reads as it starts
import pandas as pd
import psutil
import pytest
import torch
from PIL import Image

from bench import catalogue
from bench.modes import speed
from bench.outputs import headline
from bench.outputs.declared import Bullets, Rows
from bench.stages.planning import prepare
from bench.stages.records import record

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
# the processes forked by tests/forkserver.py (their command lines are the server's): one list per test process
if "TESTS_FORKED" not in os.environ:
    os.environ["TESTS_FORKED"] = os.path.join(tempfile.gettempdir(), f"tests-forked-{os.getpid()}")
    atexit.register(lambda listed=Path(os.environ["TESTS_FORKED"]): listed.unlink(missing_ok=True))
FORKED = os.environ["TESTS_FORKED"]
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


def walkthrough(doc, section, name):
    """The code block a doc's walkthrough marks `<!-- walkthrough: name -->` in its section (`## section`), as text:
    what a test that follows the walkthrough runs, so that the doc and the test cannot part."""
    text = (ROOT / doc).read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = text.split(f"<!-- walkthrough: {name} -->\n", 1)[1]
    lines = block.split("```", 2)[1].splitlines()[1:]  # the fence's language left out
    return textwrap.dedent("\n".join(lines)).strip("\n")


def mode_outputs():
    """Every mode's own outputs but the bench's (their registrations' in bench/modes/), in the registry's order: what
    --save-baseline keeps beside a bench's summary."""
    from bench.modes import registered, speed

    return [name for m in registered().values() if m is not speed.MODE for name in m.outputs if name != "runs.csv"]


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
    bench = args[0] == "-m" and args[1] == "bench" and (Path(cwd) / "bench").is_dir()  # this suite or a copy
    torchrun = tuple(map(str, args[:2])) == ("-m", "torch.distributed.run")  # its workers forked from it too
    forkable = str(args[0]).endswith(".py") or bench or torchrun  # see tests/forkserver.py
    if forkable and not preexec and FORKS.suits(full_env):
        return FORKS.run(cmd, cwd, full_env, timeout)
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env, preexec_fn=preexec
    )


def made(*make_args):
    """The arguments a make target hands Python, as its recipe builds them (its own checks run first): the recipe run
    with PY an interpreter that prints them. run(*made(...)) is the target's run, forked where run() forks."""
    shows = f"{PY} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"
    done = subprocess.run(["make", "-s", *make_args, f"PY={shows}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_in(copy, *cmd, timeout=300):
    """A command in a copy of the suite (a walkthrough's), its stdout; it must succeed. `python -m bench` there is
    forked from the tests' server as run() forks it here (the copy's bench imported: tests/forkserver.py)."""
    if cmd[:3] == (PY, "-m", "bench"):
        done = run(*cmd[1:], cwd=copy, timeout=timeout)
    else:
        done = subprocess.run(cmd, cwd=copy, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


class ForkServer:
    """`python SCRIPT.py ...` forked from a process that has imported torch already (tests/forkserver.py): the
    same run without seconds of imports. Used where the run's environment holds nothing an interpreter reads at
    its start that differs from the server's (READ_AT_START); TESTS_NO_FORKSERVER=1 turns it off."""

    def __init__(self):
        self.process, self.started_env, self.buffer = None, None, b""

    def suits(self, env):
        if os.environ.get("TESTS_NO_FORKSERVER"):
            return False
        if self.process is None or self.process.poll() is not None:
            self.started_env, self.buffer = {**os.environ, "PYTHONWARNINGS": "ignore"}, b""
            self.process = subprocess.Popen(
                [PY, str(ROOT / "tests" / "forkserver.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True, env=self.started_env, cwd=ROOT, bufsize=1,
            )  # fmt: skip
        return forkserver.at_start(env) == forkserver.at_start(self.started_env)

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
            request["cores"] = sorted(os.sched_getaffinity(0))  # the test's cores (tests/suite.py: shares_cores)
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
    """No process whose command line holds marker (a path unique to the test) is left running: one started as an
    interpreter, or one forked by tests/forkserver.py with such an argv (its list, FORKED)."""
    left = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True).stdout.split()
    forked = [json.loads(line) for line in Path(FORKED).read_text().splitlines()] if Path(FORKED).is_file() else []
    for pid, created, argv in forked:
        try:
            process = psutil.Process(pid)
            if str(marker) in " ".join(argv) and process.create_time() == created:
                left += [str(pid)] if process.status() != psutil.STATUS_ZOMBIE else []
        except psutil.NoSuchProcess:
            pass
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
# the real flag sets of the CPUs CI and the team run on: AVX2 only (an AMD EPYC), AVX-512-BF16 without AMX (an AMD EPYC
# of another generation), AVX-512-BF16 with AMX (a Xeon): each class a test of the bf16 rule takes (cpu.py)
CPU_CLASSES = dict(
    avx2="fpu sse2 avx avx2 fma",
    avx512bf16="fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16",
    bf16="fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_bf16",
)
NATIVE = dict(avx2=False, avx512bf16=True, bf16=True)  # bf16 native in each class

TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", 2)  # two CPU processes (gloo)


def train(script, data, metrics, *args, timeout=600, env=None, file_limit=None, launcher=(), memory_limit=None):
    """Run a training script on data with the small model (under launcher, e.g. TORCHRUN, if given); return
    (CompletedProcess, metrics or None)."""
    cmd = [*launcher, script, "--data", data, "--model", SMALL_MODEL, "--metrics-out", metrics, "--no-progress"]
    cmd += ["--batch-size", 16, "--workers", 1, *args]  # later flags win
    result = run(*cmd, timeout=timeout, env=env, file_limit=file_limit, memory_limit=memory_limit)
    written = json.loads(Path(metrics).read_text()) if Path(metrics).is_file() else None
    return result, written


class Joined(Exception):
    """Raised by the stubbed init_process_group: what happened up to it is all the test needs."""


def join_stubbed(monkeypatch, data, gpus, local_rank, local_world_size, *flags):
    """train_ddp.main() as process local_rank of local_world_size on a machine of `gpus` GPUs, up to its joining:
    the calls it made to bind its GPU and join (the device calls stubbed)."""
    train_ddp = importlib.import_module("train_ddp")
    calls = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.setdefault("set_device", device))

    def init(backend, **kwargs):
        calls.update(backend=backend, **kwargs)
        raise Joined

    monkeypatch.setattr(train_ddp.dist, "init_process_group", init)
    env = dict(
        RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE="16", LOCAL_WORLD_SIZE=str(local_world_size)
    )
    monkeypatch.setattr(train_ddp.os, "environ", {**train_ddp.os.environ, **env})
    monkeypatch.setattr(sys, "argv", ["train_ddp.py", "--data", str(data), "--batch-size", "16", *flags])
    with pytest.raises(Joined):
        train_ddp.main()
    return calls


class FakeNVML:
    """Two GPUs (the first in MIG mode with two instances) and the processes on them, as pynvml answers."""

    class NVMLError(Exception):
        pass

    def __init__(self, processes, fail_after=None):
        self.processes, self.calls, self.fail_after = processes, 0, fail_after
        self.uuids = {"gpu0": "GPU-aaaa1111", "gpu1": "GPU-bbbb2222", "mig0": "MIG-cccc3333", "mig1": "MIG-dddd4444"}

    def __getattr__(self, name):
        raise AttributeError(name)

    def _count(self):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise self.NVMLError("GPU is lost")

    def nvmlInit(self):  # noqa: N802 (pynvml's names)
        pass

    def nvmlDeviceGetCount(self):  # noqa: N802
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return f"gpu{i}"

    def nvmlDeviceGetUUID(self, handle):  # noqa: N802
        return self.uuids[handle]

    def nvmlDeviceGetMigMode(self, handle):  # noqa: N802
        return (1, 1) if handle == "gpu0" else (0, 0)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):  # noqa: N802
        return 3

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, i):  # noqa: N802
        if i > 1:
            raise self.NVMLError("Not Found")
        return f"mig{i}"

    def nvmlDeviceGetMemoryInfo(self, handle):  # noqa: N802
        self._count()
        return types.SimpleNamespace(used=sum(m for h, _, m in self.processes if h == handle))

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802
        self._count()
        return [types.SimpleNamespace(pid=p, usedGpuMemory=m) for h, p, m in self.processes if h == handle]

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        if handle.startswith("mig"):
            raise self.NVMLError("Not Supported")  # MIG instances give no utilisation
        return types.SimpleNamespace(gpu=80)

    def nvmlDeviceGetClockInfo(self, handle, clock):  # noqa: N802
        return 1755

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):  # noqa: N802
        return 0x4 | 0x1  # power cap, and idle (not a slowdown)


def sleeper():
    return subprocess.Popen([PY, "-c", "import time; time.sleep(30)"])


BASE = dict(
    workload="small", kind="train", status="ok", busy=False, dataset="generated", model="net", device="cpu",
    world_size=1, global_batch_size=64, data_wait_frac=0.01, loader="torchvision", val_acc=0.5,
)  # fmt: skip


def runs_of(variants):
    """runs.csv rows: {variant: [(rate, fields of that run), ...]}; every run computes at its rate (no starving)
    unless its fields say otherwise, and uses 1000 MiB of host memory unless they say otherwise."""
    rows = []
    for variant, runs in variants.items():
        for repeat, (rate, fields) in enumerate(runs, 1):  # one run a round: the i-th runs of two variants pair
            row = dict(BASE, variant=variant, samples_per_s=rate, compute_samples_per_s=rate, peak_host_mem_mib=1000)
            row["repeat"] = repeat
            rows.append(row | fields)
    return pd.DataFrame(rows).reindex(columns=record.RUN_COLUMNS)


def verdicts(variants):
    summary = speed.summary_of(runs_of(variants))
    return dict(zip(summary["variant"], summary["verdict"])), summary.set_index("variant")


STEADY = [(100.0, {}), (102.0, {}), (98.0, {})]  # the baseline: 2% either way


def fail(script, data, metrics, *args, **kwargs):
    """Run a training script on data; check it failed cleanly (one line, exit 2, no metrics); return that line."""
    result, _ = train(script[0], data, metrics, *script[1:], *args, **kwargs)
    check_clean_failure(result, metrics)
    return result.stderr.strip()


def told(variants):
    """{label: words} of the answer for made-up runs, and the summary."""
    summary = speed.summary_of(runs_of(variants))
    said = {}
    for label, text in headline.items(summary):
        said[label] = f"{said[label]}; {text}" if label in said else text
    return said, summary.set_index("variant")


def scaled(factor, memory=1000, **fields):
    """Runs at the steady baseline's rates times factor (the same noise: a tight interval), with this memory."""
    return [(rate * factor, dict(peak_host_mem_mib=memory) | fields) for rate, _ in STEADY]


def digest(folder):
    """One hash over every file's relative path and bytes."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def dry_run(*args):
    result = run("-m", "bench", "--dry-run", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def rapl(root, zones=1, top=10**12):
    """A powercap tree like Linux's: intel-rapl:N (a package) with a part intel-rapl:N:0 that is not counted."""
    for n in range(zones):
        zone = root / f"intel-rapl:{n}"
        (zone / f"intel-rapl:{n}:0").mkdir(parents=True)
        (zone / "name").write_text(f"package-{n}\n")
        (zone / "energy_uj").write_text("0\n")
        (zone / "max_energy_range_uj").write_text(f"{top}\n")
        (zone / "constraint_0_power_limit_uw").write_text("65000000\n")
        (zone / f"intel-rapl:{n}:0" / "energy_uj").write_text("999999999\n")
    return root


def set_uj(root, *values):
    """The counters now: each file replaced whole, as sysfs reads are (never an empty file half-written)."""
    for n, value in enumerate(values):
        tmp = root / f"intel-rapl:{n}" / ".energy_uj"
        tmp.write_text(f"{value}\n")
        tmp.replace(root / f"intel-rapl:{n}" / "energy_uj")


ROW = dict(schema_version=2, bench_id="b1", workload="custom", kind="train", status="ok", busy=False)


def fake_bench(out, bench_id="b1", variants=("baseline", "amp"), repeats=(1, 2)):
    """runs.csv rows and metrics files of a bench that trained each variant, loss curves made up."""
    rows, logs = [], out / "logs" / bench_id
    logs.mkdir(parents=True)
    for variant in variants:
        for repeat in repeats:
            name = f"{variant}-{repeat}"
            rows.append(dict(bench_id=bench_id, run=name, variant=variant, kind="train", status="ok"))
            rows[-1].update(workload="small", repeat=repeat)
            loss = [[10, 2.0 - repeat / 10], [20, 1.5], [25, 1.2]]
            val = [dict(epoch=1, step=25, val_acc=0.3 * repeat, train_s=1.0, wall_s=2.0)]
            (logs / f"{name}.json").write_text(json.dumps(dict(loss_curve=loss, val_curve=val)))
    rows.append(dict(bench_id=bench_id, run="loader-1", variant="loader", kind="loader", status="ok", repeat=1))
    return pd.DataFrame(rows)


SAVED = ROOT / "baseline" / "cpu-2core-amd-epyc-avx2"


TORCHRUN_NPROC = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node")


def fsdp(tmp_path, name, *args, nproc=2, script="train_fsdp.py"):
    metrics = tmp_path / f"{name}.json"
    cmd = [*TORCHRUN_NPROC, nproc, script, "--device", "cpu", "--metrics-out", metrics, "--no-progress", *args]
    return run(*cmd, timeout=300), metrics


TINY = ["--steps", 3, "--warmup-steps", 1, "--batch-size", 16, "--loader-steps", 3, "--workers", 1]


def bench(data, out, *args, timeout=900):
    return run("-m", "bench", "--data", data, "--out", out, *TINY, *args, timeout=timeout)


MODULES = {
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
    for p in (ROOT / "bench").rglob("*.py")
}


BAD = textwrap.dedent(
    """
    from torch import nn

    NOT_A_FUNCTION = 3


    def raises(num_classes):
        raise ValueError("width must be even, got 7")


    def no_module(num_classes):
        return "a string"


    def wrong_scores(num_classes):
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, num_classes + 1))


    def no_parameters(num_classes):
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())


    def too_big_a_kernel(num_classes):
        return nn.Sequential(nn.Conv2d(3, 8, 64), nn.Flatten(), nn.LazyLinear(num_classes))
    """
)


VIT = "examples/vit_small.py:vit_small"


def bench_error(*args, **kwargs):
    """Run the bench; check it failed with one line; return that line."""
    result = run("-m", "bench", *args, **kwargs)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stdout + result.stderr
    assert result.stderr.startswith("bench: error: ") and "Traceback" not in result.stderr
    return result.stderr.strip()


LIMIT = 6 * 2**30


TOO_BIG = ("--model", "resnet50", "--batch-size", 32, "--steps", 2, "--warmup-steps", 1, "--workers", 0)


EXAMPLE = "examples/smallnet.py:build"


FLAGS = ["--model", SMALL_MODEL, "--no-progress", "--workers", "0", "--batch-size", "16"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROFILED = ("--steps", 7, "--warmup-steps", 1)  # 2 steps timed, then the profiler's 1 + 3 (tiny data: 7 an epoch)


def learns_like_the_baseline(m, baseline):
    """Far above chance (0.10), and at least half the baseline's accuracy. A technique changes the numerics, and
    3 short epochs then land anywhere in a wide band (with shufflenet once: the baseline 0.775, channels_last 0.95,
    compile 0.575; LEARN's tiny model gave 0.87 to 0.89 for all of them here). The check catches a model that stops
    learning, not a difference of luck."""
    assert m["val_samples"] == 200
    assert m["val_acc"] >= max(0.4, baseline["val_acc"] / 2), (m["variant"], m["val_acc"], baseline["val_acc"])


TIMED = ("--steps", 3, "--warmup-steps", 1, "--workers", 0)


def start_of_frame(data):
    """The offset of a JPEG's SOF segment."""
    i = 2
    while not 0xC0 <= data[i + 1] <= 0xC2:
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return i


def bomb(path, side=20000, exif=0):
    """Rewrite the JPEG at path to say it is side x side pixels (over Pillow's limit at 20000): a few KB
    that would decode to gigabytes. exif: bytes of metadata before the size, to push it past 4 KiB."""
    if exif:
        image = Image.open(path)
        tags = Image.Exif()
        tags[0x010E] = "x" * exif  # ImageDescription
        image.save(path, exif=tags.tobytes(), quality=90)
    data = bytearray(path.read_bytes())
    i = start_of_frame(data)
    data[i + 5 : i + 9] = side.to_bytes(2, "big") * 2
    path.write_bytes(bytes(data))
    return path


SHORT = ("--steps", "6", "--warmup-steps", "2", "--batch-size", "8", "--workers", "0", "--eval-samples", "16")


def summary_line(result, name):
    """The line of a run's printed summary that starts with name."""
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith(name + " ")]
    assert len(lines) == 1, result.stdout
    return lines[0]


# a technique's own short timed run: 4 steps after a warm-up of 2, no loading process
TECHNIQUE_TIMED = ("--steps", 4, "--warmup-steps", 2, "--workers", 0)


SYNTHETIC = ("--data", "synthetic:32:10")  # the ViT's 32 px, made on the device: no loader to wait for


def worker_cores(worker, workers, cores):
    """The cores pytest-xdist's worker (its number of workers) runs on: its share of the cores this process may use,
    taken in turn (2 workers on 2 cores: one each; 2 on 16: 8 each; 3 on 2: the third shares the first's)."""
    cores = sorted(cores)
    share = max(1, len(cores) // workers)
    start = worker * share % len(cores)
    return set(cores[start : start + share])


# python -m bench in-process with its runs made up (tests/suite.py in_process_bench): each mode's flags, the
# runs it plans here and its table; a made-up run's seconds on the executor's made-up clock
RUN_S = 10.0


STEPS = ["--steps", "5", "--warmup-steps", "1", "--batch-size", "4"]


MODES = {  # the flags of each mode, the runs it plans here, its table
    "speed": (["--variants", "baseline,amp,checkpoint", "--loaders", "none", "--repeats", "2", *STEPS], 8,
              "summary.csv"),  # each round: the baseline, amp, checkpoint, the baseline again (a CPU's round)
    "check": (["--check"], 19, "check/check.md"),
    "max_batch": (["--max-batch", "--memory-limit", "4000", "--variants", "baseline,amp,checkpoint", *STEPS], 3,
                  "max_batch.csv"),
    "to_accuracy": (["--to-accuracy", "0.5", "--variants", "baseline,amp,checkpoint", "--max-epochs", "2"], 3,
                    "to_accuracy.csv"),
    "parity": (["--parity", "--variants", "baseline,amp,checkpoint", "--seeds", "2", *STEPS], 5, "parity.csv"),
    "scaling": (["--scaling", "1,2", "--variants", "ddp", "--repeats", "2", *STEPS], 4, "scaling.csv"),
    "tune_loader": (["--tune-loader", "--workers", "1", "--loaders", "loader", "--repeats", "2", *STEPS], 3,
                    "tune_loader.csv"),
}  # fmt: skip


class Clock:
    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        return self.now


class FakeLaunch:
    """A run's row without a process: what every mode reads from one (and its metrics file); a batch above 64 runs
    out of memory; the run numbered interrupt_at is stopped by "Ctrl-C" (the executor's stop set)."""

    def __init__(self, clock, interrupt_at=None, run_s=RUN_S, failing=()):
        self.clock, self.interrupt_at, self.launched, self.run_s = clock, interrupt_at, [], run_s
        self.failing = failing  # runs that fail, by name
        self.profiled = []  # the runs launched with --profile

    def __call__(self, run, folder, timeout, stop, tensorboard=False, memory_limit_mib=None, profile=False):
        self.launched.append(run.name)
        self.profiled += [run.name] if profile else []
        if len(self.launched) == self.interrupt_at:
            signal.raise_signal(signal.SIGINT)  # as a user's Ctrl-C: the executor's handler sets its stop
            assert stop.is_set()
            return None
        self.clock.now += self.run_s
        cmd = run.cmd
        batch = int(cmd[len(cmd) - cmd[::-1].index("--batch-size")]) if "--batch-size" in cmd else 8
        if run.name in self.failing:
            return dict(status="failed", error="train.py: error: made up", wall_s=self.run_s)
        if memory_limit_mib and batch > 64:
            return dict(
                status="failed", error="train.py: error: out of memory, try a smaller --batch-size", wall_s=RUN_S
            )
        val = [
            dict(epoch=1, val_acc=0.4, train_s=4.0, wall_s=6.0),
            dict(epoch=2, val_acc=0.6, train_s=8.0, wall_s=12.0),
        ]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{run.name}.json").write_text(json.dumps(dict(samples_per_s=100.0, val_curve=val, loss_curve=[])))
        world = int(cmd[cmd.index("--nproc-per-node") + 1]) if "--nproc-per-node" in cmd else 1
        return dict(run=run.name, variant=run.variant, kind=run.kind, repeat=run.repeat, status="ok", error=None,
                    wall_s=self.run_s, samples_per_s=100.0 * world, train_loss_first=2.3, train_loss_final=1.5,
                    world_size=world, amp_dtype="bf16", host_syncs_per_step=0, memory_format="channels_last",
                    compile_mode="default", loader="dali" if "dali" in " ".join(cmd) else "torch",
                    dataset="synthetic" if "synthetic:32:10" in cmd else "generated", global_batch_size=batch,
                    model="m", image_size=16, steps_timed=4, device="cpu", time_utc="2026-11-24T00:00:00")  # fmt: skip


DESCRIBED = {}


describe = prepare.describe


def described_once(path, workload):
    """prepare.describe, each data folder's description read once (a loader.py run) for the whole session."""
    if (str(path), workload) not in DESCRIBED:
        DESCRIBED[(str(path), workload)] = describe(path, workload)
    return dict(DESCRIBED[(str(path), workload)])


# a made-up page a mode might declare (bench/outputs/declared.py): its table, and its blocks (a paragraph with a fact
# of the mode's, the table, a line a row), as tests/bench/outputs/test_declared.py and test_render.py draw and write it
PAGE_TABLE = pd.DataFrame({"variant": ["baseline", "amp"], "rate": [100.0, 150.0]})
PAGE_COLUMNS = (("variant", lambda r: r["variant"]), ("samples/s", lambda r: f"{r['rate']:,.1f}"))


def page_blocks(table, note=""):
    records = table.to_dict("records")
    return [
        f"A paragraph{note}.",
        Rows(records, PAGE_COLUMNS),
        Bullets([f"{r['variant']}: {r['rate']:.0f}" for r in records]),
    ]

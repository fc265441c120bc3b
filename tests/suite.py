"""The tests' fixtures and hooks (tests/conftest.py loads this plugin in every process that runs tests: not in
pytest-xdist's controller, which only hands them out): tiny generated data sets, the baseline's result that the
variants are compared with, the order the tests are handed out in, an end-to-end test's share of the cores. The
helpers the tests share are in helpers.py."""

import hashlib
import json
import os
import shutil
import signal
import sys

import pytest

from bench import cli, modes
from bench import data as bench_data
from bench.modes import speed
from bench.observe import machine as observed
from bench.stages.planning import prepare
from bench.stages.records import record
from bench.stages.running import execute
from helpers import (
    BAD,
    CPU_CLASSES,
    LEARN,
    MODES,
    ROOT,
    RUN_S,
    SAVED,
    SCRIPTS,
    Clock,
    FakeLaunch,
    described_once,
    generate,
    train,
    worker_cores,
)

sys.path.insert(0, str(ROOT))  # the scripts (train.py, loader.py, checks, meter) import as modules in the tests

MACHINE_CORES = set(os.sched_getaffinity(0))  # this process's cores at its start: every test's, but an e2e test's


def shares_cores(item):
    """Under pytest-xdist with TESTS_SHARE_CORES=1 (make test's parallel pass), an end-to-end test and every process it
    starts keep to its worker's share of the cores, from its fixtures' setup (a session's bench too) to their
    teardown: a bench plans its runs' threads from the cores it may use (machine.json's cpu_cores), so two benches side
    by side each plan for theirs instead of both for the whole machine. The other tests keep every core (their
    one-thread processes, a torchrun's two ranks)."""
    worker, workers = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    e2e = item.nodeid.startswith("tests/e2e/")
    if os.environ.get("TESTS_SHARE_CORES") == "1" and e2e and worker and workers:
        return worker_cores(int(worker.removeprefix("gw")), int(workers), MACHINE_CORES)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    share = shares_cores(item)
    if share:
        os.sched_setaffinity(0, share)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        os.sched_setaffinity(0, MACHINE_CORES)


# a file per test whose code, in its process or in one it starts, read the CPU's flags (checks.cpu_flags,
# bench.observe.machine.cpu_flags: CPUINFO_FLAGS_READ); make test runs those tests again as a CPU of the other class
FLAGS_READ = ROOT / "results" / "tests" / "cpu-flags-read"


def flags_read_file(nodeid):
    """The test's file, named by its id without the group that --dist loadgroup adds to it (test@group): the pass as
    the other class hands its tests out without groups."""
    if nodeid.rfind("@") > nodeid.rfind("]"):  # as pytest-xdist reads it: an "@" inside a parameter's id is no group
        nodeid = nodeid[: nodeid.rfind("@")]
    return FLAGS_READ / hashlib.sha256(nodeid.encode()).hexdigest()[:20]


@pytest.fixture(autouse=True)
def mark_cpu_flags_read(request, monkeypatch):
    FLAGS_READ.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("CPUINFO_FLAGS_READ", str(flags_read_file(request.node.nodeid)))


def order(item):
    """A test's place in the order pytest-xdist hands the tests out: those that run for minutes first, the longest
    first (their mark says about how many on one core), then the groups (the Slurm cluster's), then the rest."""
    minutes = item.get_closest_marker("minutes")
    return (-minutes.args[0], 0) if minutes else (0, 1 if item.get_closest_marker("xdist_group") else 2)


def pytest_collection_modifyitems(config, items):
    """The tests in order (order): the longest start first, so the two workers end together (a long test handed out
    last once ran on alone for minutes). TESTS_CPU_READERS=1 (make test's pass as the other class): only the tests that
    read the CPU's flags in the passes before."""
    items.sort(key=order)
    if os.environ.get("TESTS_CPU_READERS") != "1":
        return
    read = [flags_read_file(item.nodeid).exists() for item in items]
    config.hook.pytest_deselected(items=[item for item, r in zip(items, read) if not r])
    items[:] = [item for item, r in zip(items, read) if r]


@pytest.fixture
def script():
    """(script, its flags) of the base, train.py: where a behaviour is the base's shared code (the checks module, the
    loader, the meter, every unmarked line: tests/bench/outputs/test_diffs.py proves the variants' unmarked lines are
    the base's), it is tried on the base alone; tests/test_variants.py tries a few cases on every variant."""
    return SCRIPTS["train"]


@pytest.fixture(params=[name if name == "train" else pytest.param(name, marks=pytest.mark.slow) for name in SCRIPTS])
def every_script(request):
    """(script, its flags): every way of training, one after another (the base alone in make test-fast)."""
    return SCRIPTS[request.param]


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """10 classes x (12 train + 4 val) images of 16 px: enough to run every code path quickly."""
    return generate(tmp_path_factory.mktemp("data") / "tiny")


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """10 classes x (100 train + 20 val) images of 32 px: enough for a model to learn."""
    return generate(tmp_path_factory.mktemp("data") / "small", train=100, val=20, size=32)


@pytest.fixture(scope="session")
def baseline_small(small_data, tmp_path_factory):
    """The baseline's metrics after LEARN on small_data: what every variant is compared with."""
    result, metrics = train("train.py", small_data, tmp_path_factory.mktemp("baseline") / "m.json", *LEARN)
    assert result.returncode == 0, result.stderr
    return metrics


@pytest.fixture
def described(monkeypatch):
    """The plan without a look at the data folder (a subprocess): the generated workload's shape."""
    monkeypatch.setattr(prepare, "describe", lambda path, workload: dict(image_size=32, classes=list(range(10))))


@pytest.fixture(scope="session")
def report(tmp_path_factory):
    """The saved AVX2 baseline summarized again into a fresh folder, as --summarize does: (folder, summary)."""
    folder = tmp_path_factory.mktemp("report")
    shutil.copy(SAVED / "runs.csv", folder / "runs.csv")
    shutil.copy(SAVED / "rounds.txt", folder / "rounds.txt")
    runs = record.read_runs(folder / "runs.csv")
    machine = json.loads((SAVED / "machine.json").read_text())
    summary = speed.write_outputs(folder, runs["bench_id"].iloc[-1], machine)
    return folder, summary


@pytest.fixture
def models(tmp_path):
    """A folder holding bad.py (factories that go wrong in every way) and broken.py (a file that does not import)."""
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "broken.py").write_text("def build(num_classes)\n    return None\n")
    return tmp_path


@pytest.fixture(scope="session")
def big_data(tmp_path_factory):
    """10 classes x (4 train + 1 val) images of 256 px."""
    return generate(tmp_path_factory.mktemp("data") / "big", train=4, val=1, size=256)


@pytest.fixture
def data(tiny_data, tmp_path):
    """A private copy of the tiny data set, free to break."""
    return shutil.copytree(tiny_data, tmp_path / "data")


@pytest.fixture(scope="session")
def this_machine():
    """What python -m bench finds of this machine, found once (probing the GPUs takes seconds), as a CPU with native
    bf16 whatever this one is: the plans' estimates (12 s a run here; amp's 6x where bf16 is emulated) are the same on
    every machine the tests run on."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CPUINFO_FLAGS", CPU_CLASSES["bf16"])
        return modes.this_machine()


@pytest.fixture
def in_process_bench(monkeypatch, tmp_path, tiny_data, this_machine):
    """main(mode's flags + more): python -m bench in-process, its runs made up (helpers.FakeLaunch, the executor's clock
    a helpers.Clock): returns (exit code, the launches). MODES: each mode's flags."""
    clock = Clock()
    monkeypatch.setattr(execute, "time", clock)
    monkeypatch.setattr(observed, "machine_info", lambda: dict(this_machine))  # its class: the same, found again
    monkeypatch.setattr(prepare, "describe", described_once)  # the data's description (a loader.py run), read once
    monkeypatch.setattr(bench_data, "ensure", lambda *a, **k: str(tiny_data))  # --check's data: the tiny set
    out = tmp_path / "out"

    def main(mode, *more, interrupt_at=None, run_s=RUN_S, flags=None, failing=()):
        fake = FakeLaunch(clock, interrupt_at, run_s, failing)
        monkeypatch.setattr(execute, "launch", fake)
        flags = [] if more[:1] == ("--resume",) else [*(flags or MODES[mode][0]), "--timeout", "60"]
        flags += [] if mode == "check" or more[:1] == ("--resume",) else ["--data", str(tiny_data)]
        try:
            cli.main([*flags, *more, "--out", str(out), "--baseline-dir", str(tmp_path / "none")])
            code = 0
        except SystemExit as e:
            code = e.code
        finally:
            for signum in signal.SIGINT, signal.SIGTERM:
                signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
        main.profiled = fake.profiled
        return code, fake.launched

    main.out = out
    return main

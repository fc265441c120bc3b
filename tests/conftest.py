"""The tests' set-up, light: what every pytest process needs (the torch tested, the header, the durations kept), and
tests/suite.py, the fixtures and hooks, loaded in every process that runs tests. pytest-xdist's controller, which
only hands the tests out to its workers, does not load it: its imports (torch, torchvision, the bench) take seconds
of a core each time make test starts a pass, while the workers wait for the controller to start them."""

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# one compile cache for every test that compiles (torch.compile's kernels, kept between runs of the same model):
# the first compile of a configuration is cold (a minute or two on 2 cores), the next ones take seconds. It is the
# checkout's, under results/tests/, and make test empties it first: every make test compiles cold first, as CI's
# fresh clone does, never warm from an earlier run on the same machine. Set before anything imports torchvision:
# that import sets TORCHINDUCTOR_CACHE_DIR itself, to torch's own /tmp/torchinductor_<user> (shared by every clone
# on a machine, and warm from every run before), which a setdefault after it then kept, until 2026-12-06. The tests'
# own, whatever the shell sets: the kernels of their tiny models are no one's to keep, and make test empties it
COMPILE_CACHE = ROOT / "results" / "tests" / "compile-cache"


def handing_out(config):
    """Is this process pytest-xdist's controller, which runs no test?"""
    distributed = config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))
    return distributed and not hasattr(config, "workerinput") and not config.getoption("collectonly")


def pytest_configure(config):
    """make test's last pass names the torch it tests (TESTS_TORCH): a PYTHONPATH that did not take is no pass. The
    machine's cores kept for the Slurm cluster's daemons (TESTS_MACHINE_CORES: a test may keep to a share of them);
    the tests' compile cache (COMPILE_CACHE); their bytecode written."""
    os.environ.setdefault("TESTS_MACHINE_CORES", ",".join(map(str, sorted(os.sched_getaffinity(0)))))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(COMPILE_CACHE)  # before tests/suite.py imports torchvision
    # the tests' bytecode written whatever PYTHONDONTWRITEBYTECODE says (some machines set it): else every pytest
    # process rewrote the asserts of every test module again (about 3.5 s of a core each) and every interpreter a
    # test starts compiled the bench's modules again; into __pycache__, which git ignores
    sys.dont_write_bytecode = False  # before the test modules are collected (and their asserts rewritten)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for every process a test starts
    expected, installed = os.environ.get("TESTS_TORCH"), importlib.metadata.version("torch")
    if expected and installed.split("+")[0] != expected:
        raise pytest.UsageError(f"TESTS_TORCH={expected}, but the torch installed here is {installed}")
    if not handing_out(config):
        config.pluginmanager.import_plugin("suite")


def pytest_report_header(config):
    """The torch and torchvision tested, and where torch is (the version installed, as its metadata says)."""
    versions = {name: importlib.metadata.version(name) for name in ("torch", "torchvision")}
    where = importlib.util.find_spec("torch").submodule_search_locations[0]
    return f"torch {versions['torch']}, torchvision {versions['torchvision']}: {where}"


# the end-to-end folder's share of make test, stated: about this on CI's 2-core machines (say so where it grows; the
# machines are shared and noisy, so it is printed with the durations and never asserted)
E2E_BUDGET_S = 800


def pytest_terminal_summary(terminalreporter, config):
    """Every test's durations (setup, call, teardown) kept in results/tests/ (a file per pass of make test and make
    test-fast: TESTS_PASS) and the end-to-end folder's total against its budget."""
    # "": the setups and teardowns that passed (a fixture's data made, a server started), kept apart from the calls
    reports = [r for key in ("passed", "failed", "error", "skipped", "") for r in terminalreporter.stats.get(key, [])]
    rows = sorted(((r.duration, r.when, r.nodeid) for r in reports if hasattr(r, "duration")), reverse=True)
    if not rows:
        return
    parts = [os.environ.get("TESTS_PASS")]  # make test's and make test-fast's passes name themselves
    if not parts[0]:
        parts = [os.environ.get("TESTS_TORCH") and f"torch-{os.environ['TESTS_TORCH']}", config.option.markexpr]
        parts.append(os.environ.get("CPUINFO_FLAGS") and "as-another-cpu")
    name = "-".join(["durations", *(p.replace(" ", "-") for p in parts if p)]) + ".csv"
    folder = ROOT / "results" / "tests"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / name, "w") as f:
            f.write("seconds,phase,test\n")
            f.writelines(f"{seconds:.2f},{when},{nodeid}\n" for seconds, when, nodeid in rows)
    except OSError as e:
        terminalreporter.write_line(f"durations not kept: {e}")
        return
    e2e = sum(seconds for seconds, _, nodeid in rows if nodeid.startswith("tests/e2e/"))
    terminalreporter.write_line(f"durations of every test: {(folder / name).relative_to(ROOT)}")
    if e2e:
        terminalreporter.write_line(
            f"end-to-end tests (tests/e2e/): {e2e:.0f} s, budget {E2E_BUDGET_S} s on CI's 2 cores"
        )

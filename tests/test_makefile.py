"""The Makefile's targets a user types: make compare and make diff without a technique, the install's warning on a
nearly full disk, make test's parallel pass keeping a group of tests on one worker, and its compile cache."""

import os
import subprocess
import sys

import pytest

from bench.outputs import diffs
from helpers import CPU_CLASSES, PY, ROOT


@pytest.mark.slow  # make and a fresh interpreter: 1.5 s each
@pytest.mark.parametrize("v,words", [("", "usage: make compare V=amp"), ("amq", "(did you mean 'amp'?)")])
def test_make_compare_without_a_technique_or_with_a_misspelt_one_is_one_line(v, words):
    result = subprocess.run(["make", "-s", "compare", f"V={v}", f"PY={PY}"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr


def test_make_tests_cpu_classes_are_the_tests_own():
    """make test CPU=CLASS sets the flags of the class the tests name (helpers.CPU_CLASSES): one set of classes."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    classes = dict(line[len("CPU_") :].split(" := ") for line in lines if line.startswith("CPU_") and " := " in line)
    assert classes == CPU_CLASSES


@pytest.mark.parametrize("v", ["amp;touch {marker}", "amp`touch {marker}`", 'amp" ; touch {marker} ; echo "'])
def test_make_compare_runs_no_command_that_v_holds(v, tmp_path):
    """V reaches the shell as an environment variable, quoted: what it holds is a variant's name, or one line."""
    marker = tmp_path / "ran"
    asked = v.format(marker=marker)
    result = subprocess.run(["make", "-s", "compare", f"V={asked}", f"PY={PY}"], cwd=ROOT, capture_output=True,
                            text=True)  # fmt: skip
    assert result.returncode == 2 and not marker.exists()
    assert "a variant's name holds letters, digits and _ : , + - alone" in result.stderr


@pytest.mark.parametrize("flags", [["V=nope"], []])
def test_make_diff_of_no_technique_names_the_techniques(flags):
    result = subprocess.run(["make", "-s", "diff", *flags], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[0] == f"usage: make diff V={'|'.join(diffs.TECHNIQUES)}"


@pytest.mark.parametrize("free_gb,warned", [(2, True), (40, False)])
def test_the_install_warns_before_it_starts_on_a_nearly_full_disk(free_gb, warned, tmp_path):
    """make's first step (.venv from requirements.txt) takes about 7 GB (6.8 at its peak here): with under 8 GB free,
    one line says so before pip starts (CI once stopped on "No space left on device" with no word before it). df is a
    stand-in that reports free_gb; python3 a stand-in that fails, so nothing is installed."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "df").write_text(
        f"#!/bin/sh\necho 'Filesystem 1024-blocks Used Available'\necho '/dev/x 1 1 {free_gb << 20}'\n"
    )
    (fake / "python3").write_text("#!/bin/sh\nexit 1\n")
    for tool in fake.iterdir():
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    venv = tmp_path / "venv"
    result = subprocess.run(["make", "-s", f"VENV={venv}", f"{venv}/.installed"], cwd=ROOT, capture_output=True,
                            text=True, env=env)  # fmt: skip
    assert result.returncode != 0 and not (venv / ".installed").exists()  # the stand-in python3 failed
    said = f"make: warning: {free_gb} GB free on this disk; the install may stop with 'No space left on device'"
    assert (said in result.stderr) == warned, result.stderr


def test_each_worker_of_the_e2e_pass_keeps_to_its_share_of_the_cores():
    """tests/suite.py's share: the cores taken in turn, at least one each, the last ones shared when too few."""
    from helpers import worker_cores

    assert worker_cores(0, 2, {0, 1}) == {0} and worker_cores(1, 2, {0, 1}) == {1}
    assert worker_cores(1, 2, set(range(16))) == set(range(8, 16)) and worker_cores(0, 3, set(range(16))) == {
        0,
        1,
        2,
        3,
        4,
    }
    assert worker_cores(2, 3, {4, 6}) == {4} and worker_cores(1, 2, {5}) == {5}


GROUPED = """
import pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    pass

@pytest.mark.parametrize("i", range(4))
def test_free(i):
    pass
"""


def test_make_tests_parallel_pass_runs_a_group_on_one_worker(tmp_path):
    """make test's parallel pass (XDIST_GROUPS: --dist loadgroup) runs the tests of one xdist_group on one worker: the
    Slurm cluster's, and the tests that share the tiny bench its fixture makes once a worker. pytest 9.2.0 with
    pytest-xdist 3.8.0 dropped the group without a word (xdist's issue 1386: every test handed out alone), and each
    worker made the tiny bench and started a cluster."""
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    cmd = [PY, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider", "test_grouped.py"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    workers = {line.split()[0] for line in result.stdout.splitlines() if "PASSED" in line and "test_grouped[" in line}
    free = {line.split()[0] for line in result.stdout.splitlines() if "PASSED" in line and "test_free[" in line}
    assert len(workers) == 1, result.stdout  # every test of the group on one worker
    assert free and workers <= {"[gw0]", "[gw1]"}, result.stdout  # the others handed out as they come


def test_a_tests_file_of_the_cpu_flags_it_read_is_the_same_with_its_group_or_without():
    """make test's pass as the other class reruns the tests that read the CPU's flags by their files, named in the
    parallel pass, where a test's id ends in its group (test@group), and found in a pass that has no groups."""
    from suite import flags_read_file

    assert flags_read_file("tests/e2e/t.py::test_a@slurm") == flags_read_file("tests/e2e/t.py::test_a")
    assert flags_read_file("tests/t.py::test_a[x@y]") != flags_read_file("tests/t.py::test_a[x")  # a parameter's @
    assert flags_read_file("tests/t.py::test_a") != flags_read_file("tests/t.py::test_b")


def test_make_tests_compiles_go_to_the_cache_that_it_empties_first():
    """make test empties results/tests/compile-cache first, so every make test compiles cold first, as CI's fresh
    clone does: the tests' processes, and the runs they start, compile there, not into torch's own cache in /tmp that
    importing torchvision names (warm from every earlier run on the machine: so it was, unnoticed, until 2026-12-06)."""
    import torch._inductor.runtime.cache_dir_utils as inductor

    cache = str(ROOT / "results" / "tests" / "compile-cache")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == cache and inductor.cache_dir() == cache  # a run's, inherited
    dry_run = ["make", "-n", "test", f"PY={PY}", "ARGS=-k nothing"]
    assert "rm -rf results/tests/cpu-flags-read results/tests/compile-cache" in subprocess.run(
        dry_run, cwd=ROOT, capture_output=True, text=True).stdout  # fmt: skip


def test_the_tests_write_their_bytecode_whatever_the_shell_says():
    """Every pytest process keeps the test modules' rewritten asserts (else each rewrote all of them again, about
    3.5 s of a core), and the processes the tests start write their bytecode, with PYTHONDONTWRITEBYTECODE in the
    shell or not (tests/conftest.py)."""
    assert not sys.dont_write_bytecode and "PYTHONDONTWRITEBYTECODE" not in os.environ
    kept = (
        ROOT / "tests" / "__pycache__" / f"test_makefile.{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"
    )
    assert kept.is_file()
    started = subprocess.run(
        [PY, "-c", "import sys; print(sys.flags.dont_write_bytecode)"], capture_output=True, text=True
    )
    assert started.stdout.strip() == "0"

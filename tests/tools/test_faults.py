"""tools/faults.py: a fault written into a module, the tests that name it run, the module put back; caught or not."""

import faults

from helpers import ROOT, run

MODULE = "def double(x):\n    return 2 * x\n"


def a_checkout(tmp_path, test):
    """A checkout of one module and one test file that names it."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "twice.py").write_text(MODULE)
    (tmp_path / "tests" / "test_twice.py").write_text(f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n{test}")
    return tmp_path


def test_a_fault_a_test_checks_is_caught_by_it_and_the_module_is_put_back(tmp_path):
    root = a_checkout(tmp_path, "import twice\n\n\ndef test_doubles():\n    assert twice.double(3) == 6\n")
    by, _ = faults.inject(root, "triples", "twice.py", "return 2 * x", "return 3 * x")
    assert by == "tests/test_twice.py::test_doubles"
    assert (root / "twice.py").read_text() == MODULE


def test_a_fault_no_test_checks_survives(tmp_path):
    root = a_checkout(tmp_path, "import twice\n\n\ndef test_runs():\n    assert twice.double(3) is not None\n")
    assert faults.inject(root, "triples", "twice.py", "return 2 * x", "return 3 * x")[0] is None
    assert (root / "twice.py").read_text() == MODULE


def test_every_faults_line_is_once_in_its_file():
    for name, file, before, _ in faults.FAULTS:
        assert (ROOT / file).read_text().count(before) == 1, name


def test_bad_input_is_one_line(tmp_path):
    for flags, words in [(["--only", "nosuchfault"], "no fault's name holds it"), (["--root", tmp_path], "no tests/")]:
        result = run("tools/faults.py", *flags)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and words in result.stderr, result.stderr

"""tools/mutate.py (make mutate): which module is mutated against which tests, in a copy of the tracked tree, its
mutmut configuration, what mutmut's results say, and a module that is not one of them refused in one line."""

import configparser

import mutate
import pytest


def test_each_module_is_mutated_against_its_own_mirrored_tests():
    """tests/ mirrors bench/: a module's tests are test_<module>.py in the same place, and they exist."""
    assert mutate.MODULES
    for module, tests in mutate.MODULES.items():
        assert (mutate.ROOT / module).is_file() and tests
        for test in tests:
            assert test.replace("tests/", "", 1).replace("test_", "", 1) == module and (mutate.ROOT / test).is_file()


def test_the_copy_holds_the_tracked_files_and_its_configuration_mutates_the_module_alone(tmp_path):
    where = mutate.tree(tmp_path, "epochs")
    assert (where / "bench" / "stages" / "epochs.py").read_text() == (
        mutate.ROOT / "bench/stages/epochs.py"
    ).read_text()
    assert (where / "train.py").is_file() and not (where / ".venv").exists() and not (where / "data").exists()
    mutate.config("bench/stages/epochs.py", ["tests/bench/stages/test_epochs.py"], where)
    read = configparser.ConfigParser()
    read.read(where / "setup.cfg")
    section = read["mutmut"]
    assert section["source_paths"] == "bench" and section["only_mutate"] == "bench/stages/epochs.py"
    assert section["pytest_add_cli_args_test_selection"].split() == ["tests/bench/stages/test_epochs.py", "-m", "not",
                                                                     "slow"]  # fmt: skip
    also = section["also_copy"].split()
    assert "train.py" in also and "bench" not in also and "tests" not in also


def test_mutmuts_results_are_read_as_killed_or_not():
    text = "    bench.stages.epochs.x_fit__mutmut_1: killed\n    bench.stages.epochs.x_fit__mutmut_2: survived\n"
    text += (
        "    bench.stages.epochs.x_fit__mutmut_3: no tests\n    bench.stages.epochs.x_fit__mutmut_4: timeout\nnoise\n"
    )
    found = mutate.statuses(text)
    assert [status for _, status in found] == ["killed", "survived", "no tests", "timeout"]
    assert [mutate.KILLED[status] for _, status in found] == [True, False, False, True]


def test_a_module_that_is_not_one_of_them_is_refused_in_one_line(capsys):
    assert mutate.main(["--module", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("make mutate: no module nope (known: intervals, rules, epochs")


@pytest.mark.parametrize("argv", [["--bogus"], ["extra"]])
def test_a_flag_it_does_not_know_is_argparses_one_line_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as done:
        mutate.main(argv)
    assert done.value.code == 2 and "error:" in capsys.readouterr().err

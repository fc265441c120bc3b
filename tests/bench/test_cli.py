"""bench/cli.py: the flags read before the machine is probed, bad input in one line, the lock on a results folder,
outputs that cannot be written."""

import os
import signal
import subprocess

import pytest

import meter
from bench import BenchError, cli
from bench.observe import machine
from bench.stages.planning import plan
from helpers import PY, ROOT, bench_error, fast_first, run

HOLD = """import sys, time
sys.path.insert(0, '.')
from pathlib import Path
from bench import cli
held = cli.lock(Path(sys.argv[1]))  # kept: a lock that is collected is released
print('held', flush=True)
time.sleep(300)
"""


@pytest.fixture
def holder(tmp_path):
    """A process that holds the results folder's lock as a running bench does: (folder, process)."""
    out = tmp_path / "results"
    out.mkdir()
    process = subprocess.Popen([PY, "-c", HOLD, str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    yield out, process
    process.kill()
    process.wait()


@pytest.mark.slow
def test_the_runner_does_not_import_torch():
    """Its libraries would be shared with every run, which would then be charged only half of them (PSS)."""
    probe = "import sys; from bench import cli; from bench.observe import machine; machine.machine_info()\n"
    probe += "print('torch' in sys.modules)"
    result = run("-c", probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_flags_are_read_before_the_machine_is_probed(monkeypatch, capsys):
    """--help and a bad flag cost no torch import: the machine (torch, NVML, git) is looked at only to run."""

    def probe():
        raise AssertionError("the machine was probed")

    monkeypatch.setattr(machine, "machine_info", probe)
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0 and "--variants" in capsys.readouterr().out
    with pytest.raises(BenchError, match="unknown variant 'nosuch'"):
        cli.main(["--variants", "nosuch"])


@pytest.mark.parametrize(
    "args,words",
    fast_first(
        [
            (["--variants", "nosuch"], "unknown variant 'nosuch': choose from"),
            (["--variants", "baseline,chanels_last"], "unknown variant 'chanels_last' (did you mean 'channels_last'?)"),
            (["--loaders", "loader_dal"], "unknown loader benchmark 'loader_dal' (did you mean 'loader_dali'?)"),
            (["--variants", "all:no-foo"], "variant 'all:no-foo': unknown switch 'no-foo'"),
            (["--variants", "all:no-amp:no-amp"], "variant 'all:no-amp:no-amp': each switch once"),
            (["--variants", "all:no-ddp:no-amp:no-channels-last:no-compile"], "each switch once, and not all of them"),
            (["--variants", "all:"], "variant 'all:': unknown switch ''"),
            (["--variants", "all:no-ddp+jpeg"], "variant 'all:no-ddp+jpeg': ROW+LOADER is a training row over"),
            (["--variants", "synthetic+nvjpeg"], "variant 'synthetic+nvjpeg': ROW+LOADER"),
            (["--variants", "baseline,amp,baseline"], "--variants names a row twice"),
            (["--loaders", "nosuch"], "unknown loader benchmark 'nosuch'"),
            (["--repeats", "0"], "--repeats must be >= 1"),
            (["--repeats", "some"], "--repeats: invalid value 'some': a number of rounds, or auto"),
            (["--readme", "--summarize"], "--summarize and --readme are two modes: give one"),
            (["--steps", "5", "--warmup-steps", "5"], "--warmup-steps 5 leaves none of the 5 steps"),
            (["--batch-size", "two"], "--batch-size: invalid int value"),
            (["--data", "/no/such/folder"], "data folder /no/such/folder does not exist"),
            (["--summarize", "--out", "/no/such/results"], "no /no/such/results/runs.csv"),
            (["--budget", "abc"], "--budget: invalid value 'abc': minutes, or none"),
            (["--margin", "0"], "--margin: 0: a margin above 0 and at most 1"),
            (["--margin", "-0.1"], "--margin: -0.1: a margin above 0 and at most 1"),
            (["--margin", "1.01"], "--margin: 1.01: a margin above 0 and at most 1"),
            (["--margin", "nan"], "--margin: nan: a margin above 0 and at most 1"),
            (["--margin", "ten"], "--margin: invalid value 'ten': a share such as 0.1"),
            (["--budget", "0"], "--budget: 0: minutes above 0"),
            (["--budget", "-5"], "--budget: -5: minutes above 0"),
            (["--chunk", "0"], "--chunk 0: minutes above 0"),
            (["--chunk", "x"], "--chunk: invalid float value: 'x'"),
            (["--check", "--resume"], "--resume and --check are two modes: give one"),
            (["--check", "--summarize"], "--summarize and --check are two modes: give one"),
            (
                ["--dry-run", "--gpus", "2", "--nproc", "4", "--workload", "small"],
                "--nproc 4: DDP runs one process per GPU",
            ),
        ]
    ),
)
def test_bad_bench_input_is_one_line(args, words):
    result = run("-m", "bench", *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("bench: error: ") and words in result.stderr and "Traceback" not in result.stderr


def test_the_bench_names_tensorboard_out_of_place(tmp_path):
    result = run("-m", "bench", "--summarize", "--tensorboard", "--out", tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--tensorboard goes with a bench or --resume, not --summarize" in result.stderr


@pytest.mark.parametrize("mode", fast_first([[], ["--resume"], ["--summarize"], ["--save-baseline", "x"]]))
def test_a_second_bench_on_the_same_results_is_refused_in_one_line(holder, mode, tmp_path):
    out, _ = holder
    result = run("-m", "bench", "--out", out, "--baseline-dir", tmp_path / "saved", "--variants", "baseline", *mode)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"bench: error: another bench is using {out}") and "Traceback" not in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [".bench.lock"]  # nothing written


def test_a_lock_left_by_a_killed_bench_blocks_nothing(holder):
    out, process = holder
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (out / ".bench.lock").exists()  # the file stays; the kernel's lock went with the process
    result = run("-m", "bench", "--summarize", "--out", out)
    assert result.returncode == 2 and "no " in result.stderr and "runs.csv: run the bench first" in result.stderr
    assert "another bench" not in result.stderr


@pytest.mark.slow
def test_a_dry_run_takes_no_lock(holder):
    out, _ = holder
    result = run("-m", "bench", "--out", out, "--dry-run", "--variants", "baseline", "--loaders", "none")
    assert result.returncode == 0, result.stderr
    assert "train.py --data" in result.stdout  # the plan, printed while another bench holds the folder


def test_the_bench_profile_flag_goes_with_a_bench_and_enough_steps(tiny_data, tmp_path):
    for args, words in [
        (["--check", "--profile"], "--profile goes with a bench or --resume, not --check"),
        (["--steps", 5, "--warmup-steps", 1, "--profile"], "--profile records 4 steps after the window"),
    ]:
        result = run("-m", "bench", "--data", tiny_data, "--out", tmp_path / "results", *args)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert words in result.stderr and "Traceback" not in result.stderr
    assert plan.PROFILE_STEPS == meter.PROFILE_WARMUP + meter.PROFILE_ACTIVE


@pytest.mark.parametrize(
    "args,words",
    fast_first(
        [
            (["--seed", "-1"], "--seed -1: must be from 0 to 2**31 - 1"),
            (["--workers", "100000"], "--workers 100000: at most 8 loading processes per core"),
            (["--timeout", str(10**12)], "at most 604800 s"),
            (["--warmup-steps", "-1"], "--warmup-steps must be >= 0"),
            (["--batch-size", "121"], "--batch-size 121 is larger than the training set"),
        ]
    ),
)
def test_numbers_out_of_range_in_the_bench(tiny_data, tmp_path, args, words):
    out = tmp_path / "results"
    result = run("-m", "bench", "--data", tiny_data, "--out", out, *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert words in result.stderr and "Traceback" not in result.stderr
    assert not (out / "runs.csv").exists()


def test_bench_output_folder_that_is_a_file(tiny_data, tmp_path):
    out = tmp_path / "results"
    out.write_text("mine")
    assert f"--out {out} is a file, not a folder" in bench_error("--data", tiny_data, "--out", out)
    assert out.read_text() == "mine"


def test_bench_output_file_that_is_a_folder(tiny_data, tmp_path):
    (tmp_path / "results" / "summary.md").mkdir(parents=True)
    error = bench_error("--data", tiny_data, "--out", tmp_path / "results")
    assert "summary.md is a folder" in error and not (tmp_path / "results" / "runs.csv").exists()


def test_baseline_folder_that_is_a_file(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "summary.csv").write_text("variant\n")
    (tmp_path / "baselines").write_text("mine")
    error = bench_error("--save-baseline", "--out", tmp_path / "results", "--baseline-dir", tmp_path / "baselines")
    assert f"--baseline-dir {tmp_path / 'baselines'} is a file" in error


@pytest.mark.parametrize("text,margin", [("1e-6", 1e-6), ("0.1", 0.1), ("1", 1.0)])
def test_a_margin_just_inside_its_edges_is_taken(text, margin):
    """--margin's edges: just above 0 and exactly 1 are taken (0 and 1.01 are refused above); none given: None, the
    statistics' MARGIN."""
    assert cli.parse_args(["--margin", text, "--dry-run"]).limits.margin == margin
    assert cli.parse_args(["--dry-run"]).limits.margin is None

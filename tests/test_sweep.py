"""The second bad-input sweep, class by class, on every script (all train*.py, both loaders) and the runner:

1. numbers out of range: one line naming the flag, before any work;
2. outputs that cannot be written: checked before the work; a write that fails later (a full disk,
   simulated by a limit on file size) ends with one line and leaves no partial file, nor a torn row;
3. meaningless results: a run whose loss becomes NaN says so in its metrics and in the bench's tables;
   a data folder of one class is refused;
4. the decompression-bomb limit: both loaders refuse the same oversized image, naming it;
5. a damaged file is named before training even if the run would never read it.
"""

import shutil

import pandas as pd
import pytest
from PIL import Image

from bench import cli
from bench.outputs import markdown, verdicts
from bench.stages import record
from helpers import LOADERS, ROOT, SCRIPTS, TINY_MODEL, check_clean_failure, fast_first, run, train

TIMED = ("--steps", 3, "--warmup-steps", 1, "--workers", 0)
COMPILED = ("compile", "all")  # the scripts that run torch.compile


def test_every_training_script_is_swept():
    assert {flags[0] for flags in SCRIPTS.values()} == {p.name for p in ROOT.glob("train*.py")}


def fail(script, data, metrics, *args, **kwargs):
    """Run a training script; check it failed cleanly (one line, exit 2, no metrics); return the line."""
    result, _ = train(script[0], data, metrics, *script[1:], *args, **kwargs)
    check_clean_failure(result, metrics)
    return result.stderr.strip()


@pytest.fixture
def data(tiny_data, tmp_path):
    """A private copy of the tiny data set, free to break."""
    return shutil.copytree(tiny_data, tmp_path / "data")


# -----------------------------------------------------------------------------
# 1. numbers

NUMBERS = [
    ("--lr", "nan", "finite number above 0"),
    ("--lr", "inf", "finite number above 0"),
    ("--lr", "0", "finite number above 0"),
    ("--lr", "-0.1", "finite number above 0"),
    ("--seed", "-1", "0 or more"),
    ("--seed", str(2**40), "below 2**31"),
    ("--workers", "100000", "at most 8 loading processes per core"),
    ("--epochs", "0", "1 or more"),
    ("--steps", "-5", "1 or more"),
    ("--warmup-steps", "-1", "0 or more"),
    ("--eval-samples", "-1", "0 or more"),
    ("--eval-samples", "abc", "invalid count_or_all value"),
    ("--batch-size", "0", "1 or more"),
    ("--data", "synthetic:0", "PX pixels 1 to 8192"),
    ("--data", "synthetic:100000", "PX pixels 1 to 8192"),
    ("--data", "synthetic:32:1", "N classes 2 to 100000"),
    ("--optimizer", "adam", "invalid choice: 'adam'"),
]


FAST = {0, 4, 6, 13}  # in make test-fast: --lr nan, --seed -1, --workers 100000, synthetic:0


@pytest.mark.parametrize(
    "flag,value,words",
    [case if i in FAST else pytest.param(*case, marks=pytest.mark.slow) for i, case in enumerate(NUMBERS)],
    ids=[f"{f}={v}" for f, v, _ in NUMBERS],
)
def test_numbers_out_of_range_in_the_base(tiny_data, tmp_path, flag, value, words):
    error = fail(SCRIPTS["train"], tiny_data, tmp_path / "m.json", flag, value)
    assert (f"{flag} {value}" in error or f"argument {flag}: invalid" in error) and words in error


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in SCRIPTS if name != "train"])
def test_numbers_out_of_range_in_every_variant(tiny_data, tmp_path, name):
    for flag, value, words in NUMBERS[0], NUMBERS[5], NUMBERS[6], NUMBERS[-1]:
        error = fail(SCRIPTS[name], tiny_data, tmp_path / "m.json", flag, value)
        assert (f"{flag} {value}" in error or f"argument {flag}: invalid" in error) and words in error


LOADER_NUMBERS = [
    ("--batch-size", "0", "1 or more"),
    ("--steps", "0", "1 or more"),
    ("--warmup-steps", "-3", "0 or more"),
    ("--seed", "-1", "0 or more"),
    ("--workers", "100000", "at most 8 loading processes per core"),
]


@pytest.mark.slow
@pytest.mark.parametrize("loader", LOADERS)
def test_numbers_out_of_range_in_the_loaders(tiny_data, tmp_path, loader):
    metrics = tmp_path / "loader.json"
    for flag, value, words in LOADER_NUMBERS:
        result = run(loader, "--data", tiny_data, "--bench", flag, value, "--metrics-out", metrics)
        check_clean_failure(result, metrics, f"{flag} {value}", words)


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


@pytest.mark.parametrize(
    "args,words",
    [
        (["--size", "2"], "--size 2: must be from 8"),
        (["--seed", "-1"], "--seed -1: must be from 0"),
        (["--train", "0"], "--train 0: must be from 1"),
        (["--processes", "0"], "--processes 0: must be from 1"),
    ],
)
def test_numbers_out_of_range_in_the_data_generator(tmp_path, args, words):
    result = run("-m", "bench.data", tmp_path / "made", *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert words in result.stderr and not (tmp_path / "made").exists()


# -----------------------------------------------------------------------------
# 2. outputs


def test_metrics_path_that_is_a_folder(script, tiny_data, tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    result, _ = train(script[0], tiny_data, folder, *script[1:], *TIMED)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"cannot write metrics to {folder}: it is a folder" in result.stderr
    assert list(folder.iterdir()) == [] and not folder.with_name("metrics.tmp").exists()


@pytest.mark.parametrize("loader", fast_first(LOADERS))
@pytest.mark.parametrize("bench", [True, False], ids=["bench", "describe"])
def test_loader_metrics_path_that_is_a_folder(tiny_data, tmp_path, loader, bench):
    result = run(loader, "--data", tiny_data, *(["--bench"] if bench else []), "--metrics-out", tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"cannot write metrics to {tmp_path}: it is a folder" in result.stderr


@pytest.mark.slow  # a limit on file size: a process of its own
@pytest.mark.parametrize("name", ["train", "dali"])  # the one writer (checks.write_whole), two loaders
def test_a_full_disk_at_the_end_of_training(name, tiny_data, tmp_path):
    """The metrics file outgrows what may be written: one line, no metrics and no .tmp left. The writer is the base's
    (every variant's unmarked lines are the base's: tests/test_diffs.py)."""
    metrics = tmp_path / "m.json"
    error = fail(SCRIPTS[name], tiny_data, metrics, *TIMED, file_limit=300)
    assert f"cannot write metrics to {metrics}: File too large" in error
    assert list(tmp_path.iterdir()) == []


def test_the_compiled_scripts_write_their_metrics_as_the_base_does():
    """A limit on file size cannot reach their metrics: torch.compile writes files first (Inductor builds a probe
    program in every process). Their metrics are written by the meter, as the base's are: here, that they end
    with the base's meter.finish() and that the meter writes through the one writer the base's test above tried."""
    finish = "    meter.finish()  # the speed, the memory and the result: printed, and written to --metrics-out\n"
    assert finish in (ROOT / "train.py").read_text()
    for name in COMPILED:
        assert finish in (ROOT / SCRIPTS[name][0]).read_text()
    assert 'checks.write_whole(args.metrics_out, "metrics", ' in (ROOT / "meter.py").read_text()


@pytest.mark.slow  # a limit on file size: a process of its own
@pytest.mark.parametrize("loader", LOADERS)
def test_a_full_disk_at_the_end_of_a_loader_bench(tiny_data, tmp_path, loader):
    metrics = tmp_path / "loader.json"
    cmd = (loader, "--data", tiny_data, "--bench", "--steps", 2, "--batch-size", 8, "--workers", 0)
    result = run(*cmd, "--metrics-out", metrics, file_limit=100)
    check_clean_failure(result, metrics, f"cannot write metrics to {metrics}: File too large")
    assert list(tmp_path.iterdir()) == []


def bench_error(*args, **kwargs):
    """Run the bench; check it failed with one line; return that line."""
    result = run("-m", "bench", *args, **kwargs)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stdout + result.stderr
    assert result.stderr.startswith("bench: error: ") and "Traceback" not in result.stderr
    return result.stderr.strip()


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


def fake_runs(path, rows):
    for row in rows:
        record.append_row(path, row)


ROW = dict(schema_version=2, bench_id="b1", workload="custom", kind="train", status="ok", busy=False)
ROW.update(dataset="generated", image_size=16, steps_timed=5, global_batch_size=16, model="m")


@pytest.mark.slow
def test_a_full_disk_while_summarizing_keeps_the_rows(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    fake_runs(out / "runs.csv", [dict(ROW, run=f"baseline-{i}", variant="baseline", samples_per_s=i) for i in (1, 2)])
    before = (out / "runs.csv").read_bytes()
    error = bench_error("--summarize", "--out", out, file_limit=200)
    assert f"cannot write {out / 'summary.csv'}: File too large" in error
    assert (out / "runs.csv").read_bytes() == before
    assert sorted(p.name for p in out.iterdir() if p.name != cli.LOCK) == ["runs.csv"]


def test_a_row_that_does_not_fit_on_the_disk_is_cut_off(tmp_path):
    """append_row on a full disk: the rows before it stay whole, and the error is one BenchError."""
    path = tmp_path / "runs.csv"
    fake_runs(path, [dict(ROW, run="baseline-1", variant="baseline", samples_per_s=1.0)])
    before = path.read_bytes()
    code = (
        "import sys; from bench import BenchError; from bench.outputs import markdown\n"
        "from bench.stages import record, summarize\n"
        f"try: record.append_row({str(path)!r}, dict(run='x', error='e' * 5000))\n"
        "except BenchError as e: sys.exit(str(e))\n"
    )
    result = run("-c", code, file_limit=len(before) + 100)
    assert result.returncode == 1 and "File too large (the rows before it are kept)" in result.stderr
    assert path.read_bytes() == before


def test_the_generator_never_replaces_a_folder_of_ones_own(tmp_path):
    mine = tmp_path / "photos"
    mine.mkdir()
    (mine / "holiday.jpg").write_bytes(b"mine")
    result = run("-m", "bench.data", mine, "--train", 1, "--val", 1)
    assert result.returncode == 2 and "not generated here" in result.stderr
    assert (mine / "holiday.jpg").read_bytes() == b"mine"


def test_a_full_disk_while_generating_leaves_nothing(tmp_path):
    result = run("-m", "bench.data", tmp_path / "made", "--train", 2, "--val", 1, "--size", 64, file_limit=200)
    *progress, error = result.stderr.strip().split("\n")  # the progress bar of what was made, then one line
    assert result.returncode == 2 and "Traceback" not in result.stderr and all("img" in p for p in progress)
    assert error.startswith("bench.data: error: cannot write the generated data") and list(tmp_path.iterdir()) == []


# -----------------------------------------------------------------------------
# 3. meaningless results


@pytest.mark.parametrize(
    "script", [SCRIPTS["train"], *(pytest.param(SCRIPTS[name], marks=pytest.mark.slow) for name in ("amp", "all"))]
)
def test_a_diverged_run_says_so(script, tiny_data, tmp_path):
    """The base, and the variants that change how the loss is computed (autocast; and the whole recipe)."""
    metrics = tmp_path / "m.json"
    small = ("--model", TINY_MODEL)  # any model diverges so; a tiny graph compiles fast
    result, written = train(script[0], tiny_data, metrics, *script[1:], *TIMED, "--lr", "1e30", "--steps", 6, *small)
    assert result.returncode == 0, result.stderr
    assert isinstance(written["diverged_step"], int) and 1 <= written["diverged_step"] <= 6
    assert f"the loss stopped being a finite number at step {written['diverged_step']}" in result.stderr


def test_a_sound_run_has_not_diverged(tiny_data, tmp_path):
    result, written = train("train.py", tiny_data, tmp_path / "m.json", *TIMED)
    assert result.returncode == 0 and written["diverged_step"] is None and "finite" not in result.stderr


def test_the_tables_say_which_runs_diverged():
    rows = [dict(ROW, run=f"baseline-{i}", variant="baseline", samples_per_s=10.0 + i) for i in (1, 2)]
    rows += [dict(ROW, run="amp-1", variant="amp", samples_per_s=20.0, diverged_step=3)]
    rows += [dict(ROW, run="amp-2", variant="amp", samples_per_s=21.0)]
    summary = verdicts.summary(pd.DataFrame(rows).reindex(columns=record.RUN_COLUMNS))
    assert summary.set_index("variant")["runs_diverged"].to_dict() == {"baseline": 0, "amp": 1}
    text = markdown.markdown(summary, {"custom": "work"}, "now")
    assert "| amp (DIVERGED) |" in text and "| baseline |" in text
    assert "The loss diverged (NaN or inf) in 1 runs (amp)" in text


def test_one_class_is_refused(script, data, tmp_path):
    for split in "train", "val":
        for folder in sorted((data / split).iterdir())[1:]:
            shutil.rmtree(folder)
    error = fail(script, data, tmp_path / "m.json")
    assert "has 1 class folder(s): a classifier needs 2 or more" in error


@pytest.mark.parametrize("loader", fast_first(LOADERS))
def test_one_class_is_refused_by_the_loaders(data, tmp_path, loader):
    for split in "train", "val":
        for folder in sorted((data / split).iterdir())[1:]:
            shutil.rmtree(folder)
    result = run(loader, "--data", data, "--bench", "--metrics-out", tmp_path / "l.json")
    check_clean_failure(result, tmp_path / "l.json", "a classifier needs 2 or more")


# -----------------------------------------------------------------------------
# 4. the decompression-bomb limit, and 5. damage found before training


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


def test_the_size_is_read_from_the_header():
    import checks

    png = b"\x89PNG\r\n\x1a\n" + b"\0\0\0\rIHDR" + (30000).to_bytes(4, "big") + (20000).to_bytes(4, "big")
    assert checks.header_pixels(png + b"\0" * 8) == 30000 * 20000
    assert checks.header_pixels(b"not an image") is None


@pytest.mark.parametrize("exif", [0, 6000], ids=["size in the first 4 KiB", "size after 6 KB of metadata"])
def test_a_bomb_does_not_look_whole(data, exif):
    import checks

    path = sorted((data / "train" / "05_hstripes_cool").iterdir())[3]
    sound = bomb(path, side=16, exif=exif)
    assert checks.looks_whole(str(sound))
    assert not checks.looks_whole(str(bomb(path, exif=0)))


@pytest.mark.parametrize("how", fast_first(["dali", "torchvision", "loader_dali.py --bench"]))
def test_both_loaders_refuse_the_same_bomb_naming_it(data, tmp_path, how):
    path = bomb(data / "train" / "05_hstripes_cool" / "00003.jpg")
    metrics = tmp_path / "m.json"
    if how == "loader_dali.py --bench":
        result = run("loader_dali.py", "--data", data, "--bench", "--metrics-out", metrics)
    else:
        result, _ = train("train.py", data, metrics, "--loader", how, *TIMED)
    check_clean_failure(result, metrics, f"cannot read image {path}", "exceeds limit", "decompression bomb")


@pytest.mark.parametrize("loader", fast_first(["torchvision", "dali"]))
def test_damage_in_a_file_the_run_never_reads_is_named_first(data, tmp_path, loader):
    """Only the first validation image is evaluated (--eval-samples 1): the truncated last one is still named."""
    last = sorted((data / "val" / "09_dots_cool").iterdir())[-1]
    last.write_bytes(last.read_bytes()[:100])
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", data, metrics, "--loader", loader, *TIMED, "--eval-samples", 1)
    check_clean_failure(result, metrics, f"cannot read image {last}")

"""bench/data.py: the generated workloads: layout, sizes, the same bytes from the same seed, one generator per folder,
what a killed one left."""

import json
import os
import shutil
import subprocess

import pytest
from PIL import Image

from bench import data
from helpers import (
    ROOT,
    digest,
    generate,
    run,
)


def test_the_hard_data_overlaps_and_the_old_folders_stay_valid(tmp_path):
    assert "difficulty" not in data.parameters(**{k: v for k, v in data.WORKLOADS["small"].items()}, seed=0)
    made = {}
    for name, difficulty in ("easy", 0.0), ("hard", 0.8), ("hard-again", 0.8):
        data.generate(tmp_path / name, 2, 1, 32, difficulty=difficulty, processes=1)
        made[name] = (tmp_path / name / "train" / data.CLASSES[0] / "00000.jpg").read_bytes()
    assert made["hard"] == made["hard-again"] and made["hard"] != made["easy"]
    assert json.loads((tmp_path / "hard" / "generated.json").read_text())["difficulty"] == 0.8
    for flags in (["--difficulty", "1.5"], ["--difficulty", "0.5", "--photo"]):
        result = run("-m", "bench.data", tmp_path / "bad", "--train", 1, "--val", 1, *flags)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--difficulty" in result.stderr


def test_layout_and_sizes(tmp_path):
    out = generate(tmp_path / "d", train=3, val=2, size=24)
    meta = json.loads((out / "generated.json").read_text())
    assert len(meta["classes"]) == 10
    for split, count in ("train", 3), ("val", 2):
        folders = sorted(p.name for p in (out / split).iterdir())
        assert folders == meta["classes"]
        for folder in folders:
            images = sorted((out / split / folder).glob("*.jpg"))
            assert len(images) == count
            with Image.open(images[0]) as image:
                assert image.size == (24, 24) and image.mode == "RGB"
    assert not list(tmp_path.glob("*.tmp*")), "no temporary folder left behind"


def test_same_seed_same_bytes(tmp_path):
    a = generate(tmp_path / "a", train=4, val=2, seed=7)
    b = generate(tmp_path / "b", train=4, val=2, seed=7)
    c = generate(tmp_path / "c", train=4, val=2, seed=8)
    assert digest(a) == digest(b)
    assert digest(a) != digest(c)


def test_regenerating_replaces_the_folder(tmp_path):
    out = generate(tmp_path / "d", train=4, val=2)
    generate(out, train=2, val=1)
    assert len(list((out / "train").rglob("*.jpg"))) == 20


@pytest.mark.slow
def test_two_generators_on_one_folder_do_the_work_once(tmp_path):
    """The second waits for the first (the folder's lock) and uses what it made: one writes, the other finds it."""
    import time

    import filelock

    from bench import data
    from helpers import PY

    out = tmp_path / "d"
    held = filelock.FileLock(data.lock_path(out))
    held.acquire()  # both start while a third holds the folder: neither can finish before the other has begun
    cmd = [PY, "-m", "bench.data", out, "--train", 6, "--val", 2, "--size", 16, "--processes", 1]
    started = [
        subprocess.Popen(list(map(str, cmd)), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    time.sleep(3)
    held.release()
    said = [p.communicate(timeout=120) for p in started]
    assert [p.returncode for p in started] == [0, 0], said
    assert all("another generator is writing" in err for _, err in said), said
    outs = sorted(o.split(" ")[0] for o, _ in said)
    assert outs == ["found", "wrote"], said
    assert len(list((out / "train").rglob("*.jpg"))) == 60


def test_what_a_killed_generator_left_is_cleared_by_the_next(tmp_path):
    left = tmp_path / "d.tmp12345" / "train"
    left.mkdir(parents=True)
    (left / "half.jpg").write_bytes(b"half")
    generate(tmp_path / "d", train=2, val=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]  # nothing else beside it


def test_a_generated_folder_made_again_is_the_same_data(tmp_path):
    """Its bytes follow from its parameters: a bench resumed after its data/ was lost goes on (a user's folder keeps
    its files' times: tests/bench/stages/running/test_execute.py)."""

    from bench import data

    out = generate(tmp_path / "d", train=3, val=1)
    before = data.fingerprint(out)
    shutil.rmtree(out)
    generate(out, train=3, val=1)
    assert data.fingerprint(out) == before
    (out / "train" / data.CLASSES[0] / "extra.jpg").write_bytes(b"x")
    assert data.fingerprint(out) != before


def test_generating_data_shows_its_progress(tmp_path):
    """make data WORKLOAD=imagenet takes minutes: a progress bar says how far it is."""
    result = run("-m", "bench.data", tmp_path / "d", "--train", 3, "--val", 1, "--size", 16)
    assert result.returncode == 0, result.stderr
    assert "generating d" in result.stderr and "40/40" in result.stderr and "img" in result.stderr


THREADS_AFTER = """
import sys, threading
from tqdm import tqdm
sys.path.insert(0, {root!r})
from bench import data
if __name__ == "__main__":  # the generator's processes are spawned: they import this file again
    interval = tqdm.monitor_interval
    data.generate(sys.argv[1], 1, 1, 16, processes=1)
    print(sorted(t.name for t in threading.enumerate()), tqdm.monitor_interval == interval)
"""


@pytest.mark.slow
def test_generating_leaves_no_thread_running(tmp_path):
    """The bench generates its data in its own process, then starts its runs: no thread of the generator's (tqdm's
    monitor once outlived the bar) runs beside them, and tqdm's settings are as they were."""
    script = tmp_path / "threads.py"
    script.write_text(THREADS_AFTER.format(root=str(ROOT)))
    result = run(script, tmp_path / "d")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["['MainThread']", "True"], result.stdout


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


def test_a_workload_is_made_once_and_again_when_its_parameters_change(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "ROOT", str(tmp_path))
    monkeypatch.setitem(data.WORKLOADS, "tiny", dict(train=2, val=1, size=16, photo=False))
    folder = data.ensure("tiny")
    assert folder == str(tmp_path / "data" / "tiny")
    stamp = os.stat(os.path.join(folder, "generated.json")).st_mtime_ns
    assert data.ensure("tiny") == folder and os.stat(os.path.join(folder, "generated.json")).st_mtime_ns == stamp
    monkeypatch.setitem(data.WORKLOADS, "tiny", dict(train=3, val=1, size=16, photo=False))
    data.ensure("tiny")
    assert len(list((tmp_path / "data" / "tiny" / "train").rglob("*.jpg"))) == 30


@pytest.mark.slow
def test_photos_vary_in_size_and_are_read_at_224(tmp_path):
    out = tmp_path / "photos"
    result = run("-m", "bench.data", out, "--photo", "--train", 3, "--val", 1, "--processes", 2)
    assert result.returncode == 0, result.stderr
    from PIL import Image

    sizes = {Image.open(p).size for p in (out / "train").rglob("*.jpg")}
    assert len(sizes) > 10 and all(250 <= w <= 550 and 200 <= h <= 500 for w, h in sizes), sizes
    kb = sum(p.stat().st_size for p in (out / "train").rglob("*.jpg")) / 30 / 1024
    assert 40 < kb < 200, kb  # photographic detail: tens of KB a JPEG, not a flat few
    described = run("loader.py", "--data", out)
    assert "10 classes, 30 train / 10 val images, read at 224 px" in described.stdout


@pytest.mark.slow
def test_the_same_seed_gives_the_same_bytes_on_any_number_of_processes(tmp_path):
    one = tmp_path / "one"
    assert run("-m", "bench.data", one, "--photo", "--train", 2, "--val", 1, "--processes", 1).returncode == 0
    two = tmp_path / "two"
    assert run("-m", "bench.data", two, "--photo", "--train", 2, "--val", 1, "--processes", 2).returncode == 0
    assert digest(one) == digest(two)

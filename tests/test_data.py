"""The generated default data: layout, classes, image size, and the same bytes from the same seed."""

import json

import pytest
from PIL import Image

from helpers import digest, generate


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
    import subprocess
    import time

    import filelock

    from bench import data
    from helpers import PY, ROOT

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
    its files' times: tests/test_faults.py)."""
    import shutil

    from bench import data

    out = generate(tmp_path / "d", train=3, val=1)
    before = data.fingerprint(out)
    shutil.rmtree(out)
    generate(out, train=3, val=1)
    assert data.fingerprint(out) == before
    (out / "train" / data.CLASSES[0] / "extra.jpg").write_bytes(b"x")
    assert data.fingerprint(out) != before

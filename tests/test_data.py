"""The generated default data: layout, classes, image size, and the same bytes from the same seed."""

import hashlib
import json

from PIL import Image

from helpers import generate


def digest(folder):
    """One hash over every file's relative path and bytes."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


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

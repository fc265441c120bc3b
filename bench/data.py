"""Write the generated data sets: ImageNet-style folders of JPEGs, one per workload, from a fixed seed.

    python -m bench.data --workload small          # data/small: 10 classes, 32 px, 50,000 train + 10,000 val
    python -m bench.data --workload imagenet       # data/imagenet: 10 classes, ~400x350 px photos, 40,000 + 2,000
    python -m bench.data /tmp/tiny --train 20 --val 5 --size 16         # a folder of one's own making
    python -m bench.data /tmp/photos --photo --train 4 --val 2          # tiny ImageNet-like

Each class is a pattern (stripes, checks, rings, dots) in a colour family, drawn with a random phase,
frequency, contrast and brightness plus pixel noise, so a model has to learn the pattern and accuracy
climbs well above chance in a short run. The photo-like images (--photo, the imagenet workload) vary in
size and aspect ratio around 400x350 px and carry what makes a real photograph costly to decode and
augment: smooth shaded regions, objects with edges, fine texture and sensor noise, about 100 KB a JPEG,
with the class pattern woven through the whole picture, so that any random crop shows it.
Images are made in parallel on every core; each image has its own seed, so the same seed gives the
same bytes on any machine and with any number of processes. generated.json records the parameters:
a folder made with other ones is made again, never reused.
"""

import argparse
import contextlib
import glob
import hashlib
import json
import os
import shutil
import sys
import tempfile
from multiprocessing import get_context

import filelock
import numpy as np
from PIL import Image
from tqdm import tqdm

from bench import BenchError

PATTERNS = ("hstripes", "vstripes", "checks", "rings", "dots")
COLOURS = {"warm": (1.0, 0.55, 0.25), "cool": (0.25, 0.55, 1.0)}
CLASSES = [f"{i:02d}_{p}_{c}" for i, (c, p) in enumerate((c, p) for c in COLOURS for p in PATTERNS)]
# imagenet's 40,000 photos: an epoch of 156 steps at batch 256 holds a GPU's warm-up and a window of 136 steps (the
# recipe at 6,000 images/s: 5.8 s) with no epoch start in it (bench/stages/epochs.py)
WORKLOADS = {
    "small": dict(train=5000, val=1000, size=32, photo=False),  # CIFAR-10's sizes
    "imagenet": dict(train=4000, val=200, size=400, photo=True),  # ImageNet-like photos, 40,000 + 2,000
}
# the real data set each workload stands for (its name, its training images): a window may hold its epochs' starts no
# more often than training on it would (bench/stages/epochs.py)
STANDS_FOR = {"small": ("CIFAR-10", 50_000), "imagenet": ("ImageNet-1k", 1_281_167)}
# a workload that trains on another's generated data: vit on the photos on a GPU, on the 32 px images on a CPU
DATA_OF = dict(vit=dict(gpu="imagenet", cpu="small"))
# python -m bench --to-accuracy: classes that overlap (see draw), so accuracy climbs over epochs as CIFAR-10's does
# (a small CNN on a CPU: about 0.5, 0.6, 0.7, 0.85, 0.9 after epochs 1 to 5); not a speed workload
HARD = dict(train=300, val=100, size=32, photo=False, difficulty=0.8)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F32 = np.float32


def wave(rng, pattern, y, x, cycles):
    """The class pattern on coordinates y, x (in image widths; a column and a row broadcast): about -1 to 1 (dots: -3
    to 1)."""
    freq = cycles * 2 * np.pi
    phase = rng.uniform(0, 2 * np.pi)
    if pattern == "hstripes":
        return np.sin(freq * y + phase)
    if pattern == "vstripes":
        return np.sin(freq * x + phase)
    if pattern == "checks":
        return np.sin(freq * x + phase) * np.sin(freq * y + phase)
    if pattern == "rings":
        cy, cx = rng.uniform(-0.15, 0.15, size=2)
        return np.sin(freq * 1.5 * np.sqrt(np.square(y - cy) + np.square(x - cx)) + phase)
    return np.cos(freq * x + phase) + np.cos(freq * y + phase) - 1  # dots: a grid of blobs


def draw(rng, pattern, colour, size, difficulty=0.0):
    """A small image of a class (size x size) as an HxWx3 uint8 array. difficulty (0 to 1) lays another class's
    pattern and colour over it, fainter than its own, and adds noise: the classes overlap, so accuracy climbs over
    epochs rather than in one (0: the images of the speed workloads, the same bytes as before it existed)."""
    y, x = np.mgrid[0:size, 0:size] / size - 0.5
    w = wave(rng, pattern, y, x, rng.uniform(2.5, 4.5))
    contrast, brightness = rng.uniform(0.25, 0.45), rng.uniform(0.35, 0.65)
    tint = np.array(COLOURS[colour]) * rng.uniform(0.8, 1.2, size=3)
    noise = 0.12
    if difficulty:
        other = CLASSES[rng.integers(len(CLASSES))].split("_")
        w = w + difficulty * rng.uniform(0.5, 1.0) * wave(rng, other[1], y, x, rng.uniform(2.5, 4.5))
        blend = difficulty * rng.uniform(0, 0.6)
        tint = (1 - blend) * tint + blend * np.array(COLOURS[other[2]]) * rng.uniform(0.8, 1.2, size=3)
        noise += 0.25 * difficulty
    image = brightness + contrast * w[..., None] * tint
    image = image + rng.normal(0, noise, size=image.shape)
    return (np.clip(image, 0, 1) * 255).round().astype(np.uint8)


def smooth(rng, h, w, cells):
    """A smooth random field: noise on a coarse grid, resized up (bicubic); about [-1, 1]."""
    coarse = rng.normal(0, 1, size=(cells, max(2, cells * w // h))).astype(F32)
    image = Image.fromarray(coarse, mode="F").resize((w, h), Image.BICUBIC)
    return np.asarray(image)


def stretch(n, size):
    """(size, n): the bicubic weights that stretch n samples to size (PIL's, along one axis): A @ coarse @ B.T resizes
    a stack of coarse fields at once."""
    return np.asarray(Image.fromarray(np.eye(n, dtype=F32), mode="F").resize((n, size), Image.BICUBIC))


def draw_photo(rng, pattern, colour, size):
    """A photo-like image of a class, about size x 0.875 size px and varied, as an HxWx3 uint8 array.

    Drawn in float32 on three colour planes, each field a column and a row that broadcast, each object inside its
    own box, noise uniform (sd 0.1): 116 images a second per core with their JPEGs on the 2-core Xeon, where the
    first drawing (float64, every object over the whole image) made 19."""
    h = int(size * 0.875 * rng.uniform(0.7, 1.3))
    w = int(size * rng.uniform(0.7, 1.3))
    side = max(h, w)
    y = (np.arange(h, dtype=F32) / side - F32(0.5))[:, None]
    x = (np.arange(w, dtype=F32) / side - F32(0.5))[None, :]
    # smooth shading: soft colour fields and a sky-to-ground gradient
    cols = max(2, 4 * w // h)
    image = stretch(4, h) @ rng.normal(0, 0.125, size=(3, 4, cols)).astype(F32) @ stretch(cols, w).T  # (3, h, w)
    level, slope = (rng.uniform(lo, hi, size=(3, 1, 1)).astype(F32) for lo, hi in ((0.3, 0.7), (-0.15, 0.15)))
    image += level + slope * y
    # objects: ellipses and boxes of flat colour with soft shading and hard edges
    for _ in range(rng.integers(3, 8)):
        cy, cx, ry, rx = (
            F32(rng.uniform(*bounds)) for bounds in ((-0.5, 0.5), (-0.5, 0.5), (0.05, 0.25), (0.05, 0.25))
        )
        ellipse, shade = rng.random() < 0.5, rng.uniform(0.1, 0.9, size=(3, 1, 1)).astype(F32)
        top, bottom = max(0, int((cy - ry + 0.5) * side)), min(h, int((cy + ry + 0.5) * side) + 2)
        left, right = max(0, int((cx - rx + 0.5) * side)), min(w, int((cx + rx + 0.5) * side) + 2)
        ys, xs = y[top:bottom], x[:, left:right]
        if ellipse:
            inside = np.square((ys - cy) / ry) + np.square((xs - cx) / rx) < 1
        else:
            inside = (abs(ys - cy) < ry) & (abs(xs - cx) < rx)
        np.copyto(image[:, top:bottom, left:right], shade + F32(0.1) * (ys - cy) / ry, where=inside)
    # the class pattern, woven through the whole picture, and fine texture and sensor noise
    cycles = rng.uniform(8, 14)
    tint = (np.array(COLOURS[colour]) * rng.uniform(0.8, 1.2, size=3)).astype(F32)[:, None, None]
    image += F32(rng.uniform(0.2, 0.3)) * wave(rng, pattern, y, x, cycles) * tint
    image += F32(0.08) * smooth(rng, h, w, side // 3)
    image += rng.random(size=image.shape, dtype=F32) * F32(0.35) - F32(0.175)
    image = np.clip(image * F32(255) + F32(0.5), 0, 255, out=image)
    return np.ascontiguousarray(image.astype(np.uint8).transpose(1, 2, 0))


def write_one(job):
    path, seed, split_id, k, i, size, photo, difficulty = job
    rng = np.random.default_rng([seed, split_id, k, i])
    name = CLASSES[k]
    colour, pattern = name.split("_")[2], name.split("_")[1]
    pixels = draw_photo(rng, pattern, colour, size) if photo else draw(rng, pattern, colour, size, difficulty)
    Image.fromarray(pixels).save(path, quality=90)


GENERATOR = 3  # counts changes of what the same parameters draw: a folder from another one is made again


def parameters(train, val, size, photo, seed, difficulty=0.0):
    """What generated.json records; difficulty only when it is not 0, so the folders made before it stay valid."""
    made = dict(generator="bench.data", version=GENERATOR, seed=seed, size=size, photo=photo, classes=CLASSES,
                train_per_class=train, val_per_class=val)  # fmt: skip
    return {**made, "difficulty": difficulty} if difficulty else made


def generate(out, train_per_class=500, val_per_class=100, size=32, seed=0, photo=False, processes=None, difficulty=0.0):
    """Write out/train/<class>/*.jpg and out/val/<class>/*.jpg; nothing half-written on failure. A folder
    already at out is replaced only if it was generated (or is empty): never a folder of one's own.

    One generator per folder: a second one started on the same folder waits for the first (a lock, the kernel's,
    in the temporary folder: a generator killed half-way holds it no more, and nothing is left beside out) and,
    where the first made the same, uses its result.
    What a generator killed half-way left (out.tmp<pid>) is removed by the next one. True where it wrote the folder."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise BenchError(f"{out} is a file: name a folder to write the data to")
    made = parameters(train_per_class, val_per_class, size, photo, seed, difficulty)
    lock = filelock.FileLock(lock_path(out))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        print(f"another generator is writing {out}: waiting for it", file=sys.stderr, flush=True)
        lock.acquire()
    except OSError as e:
        raise BenchError(f"cannot write the generated data to {out}: {e.strerror or e}") from None
    try:
        if generated_with(out) == made:
            return False
        if os.path.isdir(out) and os.listdir(out) and not os.path.exists(os.path.join(out, "generated.json")):
            raise BenchError(f"{out} holds files that were not generated here: name a new folder (it is replaced)")
        for left in glob.glob(f"{glob.escape(str(out))}.tmp*"):  # under the lock no other generator writes here
            shutil.rmtree(left, ignore_errors=True)
        write_all(out, made, train_per_class, val_per_class, size, seed, photo, processes, difficulty)
        return True
    finally:
        lock.release()


def lock_path(out):
    """The lock of the generators of folder out: in the temporary folder, named by out's real path."""
    digest = hashlib.sha256(os.path.realpath(out).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"bench-data-{digest}.lock")


def generated_with(out):
    """The parameters a generated folder was made with (its generated.json), or None."""
    try:
        with open(os.path.join(out, "generated.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def one_thread_each():
    """The generators started with one BLAS thread each (their environment, read as numpy loads): a process per core
    already, and BLAS's threads, spinning beside them, halved the rate on 2 cores."""
    before = {name: os.environ.get(name) for name in BLAS_THREADS}
    os.environ.update(dict.fromkeys(BLAS_THREADS, "1"))
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def write_all(out, made, train_per_class, val_per_class, size, seed, photo, processes, difficulty):
    """Every image, into out.tmp<pid> and then in place of out at once."""
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        jobs = []
        for split_id, (split, count) in enumerate((("train", train_per_class), ("val", val_per_class))):
            for k, name in enumerate(CLASSES):
                folder = os.path.join(tmp, split, name)
                os.makedirs(folder)
                jobs += [
                    (os.path.join(folder, f"{i:05d}.jpg"), seed, split_id, k, i, size, photo, difficulty)
                    for i in range(count)
                ]
        # spawned, not forked: a process that has started threads (torch's, a sampler's, a browser driver's) can
        # leave a lock held in a forked child, which then waits for ever; progress on stderr
        with one_thread_each(), get_context("spawn").Pool(processes or len(os.sched_getaffinity(0))) as pool:
            done = pool.imap_unordered(write_one, jobs, chunksize=16)
            # no tqdm monitor: its thread would outlive the bar, running in the bench beside every run it starts
            interval, tqdm.monitor_interval = tqdm.monitor_interval, 0
            try:
                for _ in tqdm(done, total=len(jobs), desc=f"generating {os.path.basename(out)}", unit="img",
                              mininterval=2):  # fmt: skip
                    pass
            finally:
                tqdm.monitor_interval = interval
        with open(os.path.join(tmp, "generated.json"), "w") as f:
            json.dump(made, f, indent=1)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    except OSError as e:  # a full disk, a folder that cannot be made: nothing is left half-written
        raise BenchError(f"cannot write the generated data to {out}: {e.strerror or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fingerprint(path):
    """A digest of what a data folder holds: every file's path, size and modification time (a file added, removed or
    rewritten changes it); None where path is not a folder (synthetic data, CIFAR-10 named by another path). A
    generated folder's bytes follow from its parameters (generated.json): made again from them it is the same data,
    so there the times are left out (a bench resumed after its data/ was lost and made again goes on)."""
    if not os.path.isdir(path):
        return None
    generated = generated_with(path) is not None
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            stat = os.stat(os.path.join(folder, name))
            when = "" if generated else stat.st_mtime_ns
            digest.update(f"{os.path.relpath(os.path.join(folder, name), path)}\0{stat.st_size}\0{when}\n".encode())
    return digest.hexdigest()[:16]


def data_workload(workload, gpu):
    """The generated data a workload trains on: its own, or (vit) another's."""
    return DATA_OF.get(workload, {}).get("gpu" if gpu else "cpu", workload)


def ensure(workload, seed=0, spec=None):
    """The workload's folder under data/, generated when missing or made with other parameters; its path.
    spec: the sizes of a folder that is no workload of the bench's (dict(train=, val=, size=, photo=)). Two at once
    on one workload generate it once (generate's lock): the second waits and uses it."""
    spec = spec or WORKLOADS[workload]
    out = os.path.join(ROOT, "data", workload)
    if generated_with(out) == parameters(seed=seed, **spec):
        return out
    hint = f" (python -m bench.data --workload {workload})" if workload in WORKLOADS else ""
    print(f"generating the {workload} workload in {out}{hint}", flush=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    generate(out, spec["train"], spec["val"], spec["size"], seed, spec["photo"], difficulty=spec.get("difficulty", 0.0))
    return out


def main():
    try:
        write(sys.argv[1:])
    except BenchError as e:
        print(f"bench.data: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def write(argv):
    parser = argparse.ArgumentParser(
        prog="python -m bench.data", description="Write a generated data set: a workload's, or one of your own."
    )
    parser.add_argument("out", nargs="?", help="output folder (replaced); default: data/<workload>")
    parser.add_argument("--workload", choices=list(WORKLOADS), help="a bench workload, with its sizes")
    parser.add_argument("--train", type=int, default=500, help="training images per class")
    parser.add_argument("--val", type=int, default=100, help="validation images per class")
    parser.add_argument(
        "--size", type=int, default=None, help="image side in pixels, 32 (photos: about the width, 400)"
    )
    parser.add_argument("--photo", action="store_true", help="photo-like images of varied size (ImageNet-like)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--difficulty", type=float, default=0.0, help="0 to 1: classes that overlap (not photos)")
    parser.add_argument("--processes", type=int, default=None, help="default: every core")
    args = parser.parse_args(argv)
    if args.workload and args.out is None:
        out = ensure(args.workload, args.seed)
        print(f"{out}: the {args.workload} workload")
        return
    if args.workload:
        spec = WORKLOADS[args.workload]
        args.train, args.val, args.size, args.photo = spec["train"], spec["val"], spec["size"], spec["photo"]
    if args.out is None:
        parser.error("name an output folder, or a --workload")
    if args.size is None:
        args.size = 400 if args.photo else 32
    cores = os.cpu_count() or 1
    limits = dict(train=(1, 10**6), val=(1, 10**6), size=(8, 4096), seed=(0, 2**31 - 1), processes=(1, 8 * cores))
    values = dict(train=args.train, val=args.val, size=args.size, seed=args.seed, processes=args.processes)
    for name, (least, most) in limits.items():
        value = values[name]
        if value is not None and not least <= value <= most:
            raise BenchError(f"--{name} {value}: must be from {least} to {most}")
    if not 0 <= args.difficulty <= 1 or (args.difficulty and args.photo):
        raise BenchError(f"--difficulty {args.difficulty}: from 0 to 1, and only for images that are not --photo")
    wrote = generate(args.out, args.train, args.val, args.size, args.seed, args.photo, args.processes, args.difficulty)
    total = len(CLASSES) * (args.train + args.val)
    kind = "photo-like images around" if args.photo else "images of"
    said = "wrote" if wrote else "found (generated with the same parameters)"
    print(f"{said} {total} {kind} {args.size} px ({len(CLASSES)} classes) in {args.out}/")


if __name__ == "__main__":
    main()

"""Write the generated default data: a small ImageNet-style folder of JPEGs.

    python -m bench.data data                      # 10 classes, 32 px, 500 train + 100 val images each
    python -m bench.data /tmp/tiny --train 20 --val 5

Each class is a pattern (stripes, checks, rings, dots) in a colour family, drawn with a random
phase, frequency, contrast and brightness plus pixel noise, so a model has to learn the pattern
and accuracy climbs well above chance in a short run. The same seed gives the same bytes.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
from PIL import Image

PATTERNS = ("hstripes", "vstripes", "checks", "rings", "dots")
COLOURS = {"warm": (1.0, 0.55, 0.25), "cool": (0.25, 0.55, 1.0)}
CLASSES = [f"{i:02d}_{p}_{c}" for i, (c, p) in enumerate((c, p) for c in COLOURS for p in PATTERNS)]


def draw(rng, pattern, colour, size):
    """One image of a class as an HxWx3 uint8 array."""
    y, x = np.mgrid[0:size, 0:size] / size - 0.5
    freq = rng.uniform(2.5, 4.5) * 2 * np.pi
    phase = rng.uniform(0, 2 * np.pi)
    if pattern == "hstripes":
        wave = np.sin(freq * y + phase)
    elif pattern == "vstripes":
        wave = np.sin(freq * x + phase)
    elif pattern == "checks":
        wave = np.sin(freq * x + phase) * np.sin(freq * y + phase)
    elif pattern == "rings":
        cy, cx = rng.uniform(-0.15, 0.15, size=2)
        wave = np.sin(freq * 1.5 * np.hypot(y - cy, x - cx) + phase)
    else:  # dots: a grid of blobs
        wave = np.cos(freq * x + phase) + np.cos(freq * y + phase) - 1
    contrast = rng.uniform(0.25, 0.45)
    brightness = rng.uniform(0.35, 0.65)
    tint = np.array(COLOURS[colour]) * rng.uniform(0.8, 1.2, size=3)
    image = brightness + contrast * wave[..., None] * tint
    image = image + rng.normal(0, 0.12, size=image.shape)
    return (np.clip(image, 0, 1) * 255).round().astype(np.uint8)


def generate(out, train_per_class=500, val_per_class=100, size=32, seed=0):
    """Write out/train/<class>/*.jpg and out/val/<class>/*.jpg; nothing half-written on failure."""
    tmp = f"{out}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for split_id, (split, count) in enumerate((("train", train_per_class), ("val", val_per_class))):
            for k, name in enumerate(CLASSES):
                folder = os.path.join(tmp, split, name)
                os.makedirs(folder)
                colour, pattern = name.split("_")[2], name.split("_")[1]
                for i in range(count):
                    rng = np.random.default_rng([seed, split_id, k, i])
                    path = os.path.join(folder, f"{i:05d}.jpg")
                    Image.fromarray(draw(rng, pattern, colour, size)).save(path, quality=90)
        meta = dict(generator="bench.data", seed=seed, size=size, classes=CLASSES)
        meta.update(train_per_class=train_per_class, val_per_class=val_per_class)
        with open(os.path.join(tmp, "generated.json"), "w") as f:
            json.dump(meta, f, indent=1)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description="Write the generated default data set.")
    parser.add_argument("out", nargs="?", default="data", help="output folder (replaced)")
    parser.add_argument("--train", type=int, default=500, help="training images per class")
    parser.add_argument("--val", type=int, default=100, help="validation images per class")
    parser.add_argument("--size", type=int, default=32, help="image side in pixels")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if min(args.train, args.val) < 1 or args.size < 8:
        sys.exit("bench.data: error: --train and --val must be >= 1 and --size >= 8")
    generate(args.out, args.train, args.val, args.size, args.seed)
    total = len(CLASSES) * (args.train + args.val)
    print(f"wrote {total} images ({len(CLASSES)} classes, {args.size} px) to {args.out}/")


if __name__ == "__main__":
    main()

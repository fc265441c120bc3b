"""loader.py with the input pipeline in NVIDIA DALI: read, decode (on the GPU when there is one), augment.

train.py uses it with `--loader dali`; `diff loader.py loader_dali.py` shows the technique and nothing else.
Run on its own, it describes a data folder or measures the DALI pipeline alone, as loader.py does:

    python train.py --loader dali                 # train on batches from this pipeline
    torchrun --standalone --nproc-per-node 2 train_ddp.py --loader dali    # each rank reads its own shard
    python loader_dali.py --data data/small --bench   # images/s delivered to the device
    python loader_dali.py --data data/imagenet --bench --batch-size 512 --workers 4 --metrics-out loader.json

Reads image folders only (train/<class>/*.jpg and val/<class>/*.jpg): for CIFAR-10 use loader.py.
Needs `pip install nvidia-dali-cuda130` (or the nvidia-dali-cudaXXX for your CUDA); with no GPU it runs on the CPU.
"""

import argparse
import json
import os
import statistics
import sys
import time
from typing import NamedTuple, Optional

import torch
from PIL import Image
from torchvision import datasets

# new # NVIDIA DALI in place of the DataLoader's transforms, imported here but needed only when its loader is used
try:
    import nvidia.dali
    from nvidia.dali import Pipeline, fn, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
except ImportError as e:
    dali_missing = f"--loader dali needs NVIDIA DALI ({e}): pip install nvidia-dali-cuda130 (or the one for your CUDA)"
else:
    dali_missing = None

import checks
from checks import die

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet statistics, 0-1 scale
SMALL = 64  # images this small keep their size; larger ones are cropped to 224 px as for ImageNet
SYNTHETIC_IMAGES = 128_000, 256  # the images of synthetic data's epoch (1000 batches of 128) and of its validation
SYNTHETIC_MAX = 8192, 100_000  # the largest synthetic image side and number of classes


class DataInfo(NamedTuple):
    """What open_data() found; the same fields from every loader."""

    dataset: str  # generated, imagefolder, cifar10 or synthetic
    classes: list  # class names, in label order
    image_size: int  # side of the square images in a batch
    train_size: int  # images in the training set
    val_size: int  # images in the validation set
    loader: str  # torchvision, dali or synthetic
    dali_version: Optional[str] = None

    @property
    def num_classes(self):
        return len(self.classes)


class UnreadableImage(Exception):
    """An image file that cannot be decoded; the message names the file."""


def read_image(path):
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise UnreadableImage(f"cannot read image {path}: {e}") from None


def image_side(path):
    """The shorter side of an image."""
    try:
        return min(read_image(path).size)
    except UnreadableImage as e:
        die(str(e))


class Synthetic(NamedTuple):
    """--data synthetic[:PX[:N]]: no files, only the images' shape and how many an epoch has (for the sampler)."""

    size: int
    classes: int
    images: int

    def __len__(self):
        return self.images


class Repeat:
    """The same batch again and again, already on the device: `images` of it an epoch (synthetic data)."""

    def __init__(self, images, labels, count):
        self.images, self.labels, self.count, self.sampler = images, labels, count, None

    def __len__(self):
        return -(-self.count // len(self.labels))

    def __iter__(self):
        for start in range(0, self.count, len(self.labels)):
            end = min(len(self.labels), self.count - start)
            yield self.images[:end], self.labels[:end]


def synthetic_loaders(train_set, batch_size, device, seed, rank, world_size, val_images):
    """Loaders of synthetic data: one random batch made on the device, for training and validation."""
    generator = torch.Generator().manual_seed(seed + rank)
    images = torch.randn(batch_size, 3, train_set.size, train_set.size, generator=generator).to(device)
    labels = torch.randint(train_set.classes, (batch_size,), generator=generator).to(device)
    steps = len(train_set) // world_size // batch_size  # full batches an epoch, as a DataLoader's
    return Repeat(images, labels, steps * batch_size), Repeat(images, labels, val_images)


def open_synthetic(spec):
    """(train set, validation set, info) of --data synthetic[:PX[:N]]."""
    try:
        size, classes = ([int(part) for part in spec.split(":")[1:]] + [32, 10][spec.count(":") :])[:3]
    except ValueError:
        size = classes = 0
    if spec.count(":") > 2 or not 1 <= size <= SYNTHETIC_MAX[0] or not 2 <= classes <= SYNTHETIC_MAX[1]:
        die(f"--data {spec}: write synthetic[:PX[:N]], PX pixels 1 to {SYNTHETIC_MAX[0]}, N classes 2 to"
            f" {SYNTHETIC_MAX[1]}, e.g. synthetic:224:1000")  # fmt: skip
    train_set, val_set = (Synthetic(size, classes, images) for images in SYNTHETIC_IMAGES)
    info = DataInfo("synthetic", [str(k) for k in range(classes)], size, *SYNTHETIC_IMAGES, "synthetic")
    return train_set, val_set, info


def open_data(data_dir, download=False, check_data=True):
    """Return (train_set, val_set, info: DataInfo) for the data in data_dir, its format detected from the folder;
    `synthetic[:PX[:N]]` for none. The sets are torchvision datasets of PIL images; build_loaders() batches them."""
    root = str(data_dir)
    if root.split(":")[0] == "synthetic":
        return open_synthetic(root)
    # new # DALI is needed from here on
    if dali_missing:
        die(dali_missing)

    train_dir, val_dir = os.path.join(root, "train"), os.path.join(root, "val")
    if os.path.isdir(train_dir) or os.path.isdir(val_dir):
        for folder in train_dir, val_dir:
            if not os.path.isdir(folder):
                die(f"{folder} is missing: an image folder needs both train/<class>/ and val/<class>/")
        try:
            train_set = datasets.ImageFolder(train_dir, loader=read_image)
            val_set = datasets.ImageFolder(val_dir, loader=read_image)
        except FileNotFoundError as e:
            die(str(e).splitlines()[0])
        if len(train_set.classes) < 2:
            die(f"{train_dir} has {len(train_set.classes)} class folder(s): a classifier needs 2 or more")
        if train_set.classes != val_set.classes:
            only_train = sorted(set(train_set.classes) - set(val_set.classes))
            only_val = sorted(set(val_set.classes) - set(train_set.classes))
            die(f"train/ and val/ in {root} have different classes: only in train {only_train}, only in val {only_val}")
        if check_data:  # every file's ends: a broken file is named now (the bench checks once, before its runs)
            checks.check_files([path for path, _ in train_set.samples + val_set.samples], image_side)
        side = statistics.median_low(image_side(path) for path, _ in train_set.samples[:: len(train_set) // 25 + 1])
        generated = os.path.exists(os.path.join(root, "generated.json"))
        dataset = "generated" if generated else "imagefolder"
    elif os.path.isdir(os.path.join(root, "cifar-10-batches-py")) or download:
        try:
            train_set = datasets.CIFAR10(root, train=True, download=download)
            val_set = datasets.CIFAR10(root, train=False, download=download)
        except (RuntimeError, OSError) as e:
            die(f"CIFAR-10 in {root} cannot be used ({e}); pass --download to fetch it again")
        side, dataset = 32, "cifar10"
    elif not os.path.isdir(root):
        die(f"data folder {root} does not exist (make data writes the default one)")
    else:
        die(f"{root} holds neither train/ and val/ image folders nor CIFAR-10 (cifar-10-batches-py/)")
    image_size = side if side <= SMALL else 224
    # new # fn.readers.file reads image files: CIFAR-10's pickled batches need loader.py
    if dataset == "cifar10":
        die(f"--loader dali reads image folders, not CIFAR-10 in {root}: leave out --loader dali to use loader.py")
    info = DataInfo(
        dataset, train_set.classes, image_size, len(train_set), len(val_set), "dali", nvidia.dali.__version__
    )
    return train_set, val_set, info


# -----------------------------------------------------------------------------
# the input pipeline: torchvision's transforms, in DataLoader worker processes (loader_dali.py: DALI's)


# new # DALI's iterator dressed as loader.py's Loader: (images, labels) batches, len(), .sampler, one-line errors
class DALILoader:
    def __init__(self, pipe, samples, steps=None):
        # the reader tells the iterator its shard's size and padding, PARTIAL leaves a shard's padding out of its
        # last batch, the next epoch is made ready when one ends, and nothing runs before a batch is asked for
        policy = dict(reader_name="reader", last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
        self.iterator = DALIGenericIterator(pipe, ["images", "labels"], prepare_first_batch=False, **policy)
        self.steps, self.sampler = steps, None  # training: full batches an epoch, the same on all ranks; no set_epoch()
        self.paths, self.unused_s = [path for path, _ in samples], 0.0  # to name an image DALI cannot read

    # new # batches per epoch for this rank, like len(DataLoader)
    def __len__(self):
        return len(self.iterator) if self.steps is None else self.steps

    # new # read each epoch to its end (DROP would not: the next one would start with the last one's padding);
    # yield the first `steps` batches in training, every non-empty one in validation; labels come as int32 [N, 1]
    def __iter__(self):
        try:
            fetched = time.perf_counter()
            for i, (batch,) in enumerate(self.iterator):  # one dict per pipeline: here one
                if i < len(self) and len(batch["labels"]) > 0:
                    yield batch["images"], batch["labels"].view(-1).long()
                else:  # a shard's padded last batch, read and not used: --bench leaves its time out
                    self.unused_s += time.perf_counter() - fetched
                fetched = time.perf_counter()
        except RuntimeError as e:  # DALI names a file it cannot open, not one it cannot decode: find it
            die(checks.explain_dali_error(str(e), self.paths, image_side))


# new # loader.py's transforms as a DALI pipeline: DALI works on 0-255 pixels, on the GPU when it can
def dali_pipeline(samples, image_size, training, batch_size, device, workers, seed, rank, world_size):
    """A pipeline reading shard rank of world_size of samples [(path, label)] into (images, labels) batches."""
    device_id = torch.cuda.current_device() if device.type == "cuda" else None  # None: CPU operators only
    pipe = Pipeline(batch_size=batch_size, device_id=device_id, seed=seed + rank, **checks.dali_settings(workers))
    with pipe:
        encoded, labels = fn.readers.file(
            files=[path for path, _ in samples],
            labels=[label for _, label in samples],  # ImageFolder's class indices, as in loader.py
            shard_id=rank,
            num_shards=world_size,
            shuffle_after_epoch=training,  # every epoch (the first too) one permutation of all, the same on all ranks
            pad_last_batch=True,  # an epoch ends with the shard: its last batch padded, the padding dropped
            name="reader",
            **checks.known_arguments("readers__File", shuffle_after_epoch_seed=seed if training else None),
        )
        images = fn.decoders.image(encoded, device="mixed" if device_id is not None else "cpu", output_type=types.RGB)
        if training:
            area = [0.35, 1] if image_size <= SMALL else [0.08, 1]
            images = fn.random_resized_crop(images, size=[image_size, image_size], random_area=area)
            mirror = fn.random.coin_flip(probability=0.5)
        else:
            images = fn.resize(images, resize_shorter=image_size if image_size <= SMALL else 256)
            mirror = 0
        images = fn.crop_mirror_normalize(
            images,
            crop=[image_size, image_size],  # the centre crop of validation
            mirror=mirror,
            mean=[255 * m for m in MEAN],
            std=[255 * s for s in STD],
            dtype=types.FLOAT,
            output_layout="CHW",
        )
        pipe.set_outputs(images, labels if device_id is None else labels.gpu())
    return pipe


def build_loaders(
    train_set, val_set, info, batch_size, device, workers, seed, sampler=None, rank=0, world_size=1, eval_samples="all"
):
    """Return (train_loader, val_loader) of batch_size images per process from open_data()'s sets.

    Training draws its images through sampler (None: every image, reshuffled each epoch; train_ddp.py's
    DistributedSampler: this process's shard) and drops the last partial batch, so every step has the same
    size. Validation sees every image exactly once over all processes, or a fixed sample of eval_samples
    of them, spread over the whole set (0: none, an empty list, no loading process started). Batches come as
    (images float32 NCHW normalised, labels int64); train.py moves them to the device, where they may be already.
    """
    if batch_size * world_size > len(train_set):
        die(f"--batch-size {batch_size * world_size} is larger than the training set ({len(train_set)} images)")
    keep = range(len(val_set))  # the validation images evaluated: all, a fixed sample (the same every run), or none
    if eval_samples not in (None, "all") and eval_samples < len(val_set):
        keep = [i * len(val_set) // eval_samples for i in range(eval_samples)]
    if 0 < len(keep) < world_size:
        die(f"{world_size} processes but only {len(keep)} validation images: each needs one")
    val_part = keep[rank::world_size]  # this process's validation images, no padding: no image counted twice
    if info.dataset == "synthetic":
        return synthetic_loaders(train_set, batch_size, device, seed, rank, world_size, len(val_part))
    # new # with torchrun: each process reads its shard of the images, reshuffled and moved on every epoch (DALI's
    # reader shards and shuffles: the sampler is not used)
    common = dict(batch_size=batch_size, device=device, workers=workers, seed=seed, rank=rank, world_size=world_size)
    train_pipe = dali_pipeline(train_set.samples, info.image_size, training=True, **common)
    val_samples = [val_set.samples[i] for i in keep]
    val_pipe = dali_pipeline(val_samples, info.image_size, training=False, **common) if keep else None
    steps = len(train_set) // world_size // batch_size  # full batches: every step the same size, on all ranks
    train_loader = DALILoader(train_pipe, train_set.samples, steps)
    val_loader = DALILoader(val_pipe, val_samples) if keep else []  # every image once over all ranks, no padding
    return train_loader, val_loader


# -----------------------------------------------------------------------------
# python loader.py: describe the data, or measure the input pipeline alone (--bench)


def bench(args, device):
    """Time args.steps batches after args.warmup_steps, each copied to the device, the way train.py
    times its steps; return (seconds, seconds blocked in next(), epoch starts timed, of those seconds blocked the
    ones waiting for an epoch's first batch, info)."""
    train_set, val_set, info = open_data(args.data, args.download, check_data=not args.no_data_check)
    workers = checks.workers_of(args)
    train_loader, _ = build_loaders(train_set, val_set, info, args.batch_size, device, workers, args.seed)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    step, waited, epoch_starts, unused, start_wait = 0, 0.0, 0, 0.0, 0.0
    started = sync() if args.warmup_steps == 0 else None
    while step < args.warmup_steps + args.steps:
        waiting = time.perf_counter()
        for i, (images, labels) in enumerate(train_loader):
            if started is not None:  # a batch inside the window; an epoch's first waits for its refill
                wait = time.perf_counter() - waiting
                waited, epoch_starts, start_wait = waited + wait, epoch_starts + (i == 0), start_wait + wait * (i == 0)
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            step += 1
            if step == args.warmup_steps:
                started = sync()
                unused = getattr(train_loader, "unused_s", 0.0)  # loader_dali.py: time on batches it did not give
            if step == args.warmup_steps + args.steps:
                break
            waiting = time.perf_counter()
    unused = getattr(train_loader, "unused_s", 0.0) - unused  # not timed: a shard's padded last batch (DALI)
    return sync() - started - unused, waited - unused, epoch_starts, start_wait, info


def main():
    parser = argparse.ArgumentParser(
        description="Describe a data folder, or measure its input pipeline (--bench).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--data", default="data/small", help="image folder (train/, val/), CIFAR-10 root, or synthetic[:PX[:N]]"
    )
    parser.add_argument("--bench", action="store_true", help="measure images/s of the training pipeline")
    parser.add_argument("--batch-size", type=int, default=256, help="images per batch")
    parser.add_argument("--steps", type=int, default=50, help="batches timed")
    parser.add_argument("--warmup-steps", type=int, default=5, help="batches read before timing starts")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="loading processes")
    parser.add_argument("--prefetch-factor", type=int, default=None, help="batches each process keeps ready (2)")
    parser.add_argument("--pin-memory", default="auto", choices=["auto", "on", "off"], help="page-locked (auto: GPU)")
    parser.add_argument("--persistent-workers", default="on", choices=["on", "off"], help="keep the processes")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="where batches go")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data order")
    parser.add_argument("--download", action="store_true", help="fetch CIFAR-10 into --data if missing")
    parser.add_argument("--no-data-check", action="store_true", help="do not check every file (the bench did, once)")
    parser.add_argument("--metrics-out", default=None, help="write the --bench result (else what was found) as JSON")
    parser.error = die  # a bad flag ends like any other bad input: one line, exit code 2
    args = parser.parse_args()
    device = checks.pick_device(args.device, 0)  # the GPU if there is one (unless --device cpu), else cpu
    checks.at_least(args, {"--batch-size": 1, "--steps": 1, "--warmup-steps": 0, "--workers": 0, "--seed": 0})
    checks.check_workers_and_seed(args)
    if args.metrics_out:
        checks.writable(args.metrics_out)
    torch.manual_seed(args.seed)
    script = os.path.basename(__file__)
    if not args.bench:
        info = open_data(args.data, args.download, check_data=not args.no_data_check)[2]
        print(f"{args.data}: {info.dataset}, {info.num_classes} classes, {info.train_size} train / ", end="")
        print(f"{info.val_size} val images, read at {info.image_size} px by {info.loader}")
        result = info._asdict()
    else:
        seconds, waited, epoch_starts, start_wait, info = bench(args, device)
        rate = args.steps * args.batch_size / seconds
        print(f"{script}: {rate:,.0f} images/s ({info.loader}, {info.dataset} {info.image_size} px, ", end="")
        print(
            f"batch {args.batch_size}, {args.workers} workers, to {device.type}, {args.steps} batches timed, ", end=""
        )
        print(f"{epoch_starts} epoch starts)")
        result = dict(script=script, variant=os.path.splitext(script)[0], loader=info.loader, device=device.type)
        result.update(dataset=info.dataset, image_size=info.image_size, num_classes=info.num_classes)
        result.update(batch_size=args.batch_size, workers=args.workers, steps_timed=args.steps, window_s=seconds)
        result.update(checks.loading_fields(args, device, info.loader))
        result.update(samples_per_s=rate, data_wait_frac=waited / seconds, epoch_starts_timed=epoch_starts)
        steady_s, steady_images = seconds - start_wait, (args.steps - epoch_starts) * args.batch_size  # no refill
        steady = steady_s > 0 and steady_images > 0
        result.update(epoch_start_wait_s=start_wait, steps_per_epoch=info.train_size // args.batch_size)
        result.update(data_wait_steady_frac=(waited - start_wait) / steady_s if steady else None)
        result.update(steady_samples_per_s=steady_images / steady_s if steady else None)
        result.update(seed=args.seed, argv=sys.argv, torch_version=torch.__version__, dali_version=info.dali_version)
    if args.metrics_out:
        checks.write_whole(args.metrics_out, "metrics", json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

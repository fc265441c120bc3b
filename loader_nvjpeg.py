"""loader.py with the JPEG decode on the device: the loading processes read the files' bytes, torchvision decodes them
on the GPU (nvJPEG, a batch at a time) and crops, flips, resizes and normalises them there, a batch ahead of training.

train.py uses it with `--loader nvjpeg`; `diff loader.py loader_nvjpeg.py` shows the technique and nothing else.
Run on its own, it describes a data folder or measures this pipeline alone, as loader.py does:

    python train.py --loader nvjpeg                 # train on batches decoded on the GPU
    torchrun --standalone --nproc-per-node 2 train_ddp.py --loader nvjpeg    # each rank decodes its own shard
    python loader_nvjpeg.py --data data/imagenet --bench   # images/s delivered to the device
    python loader_nvjpeg.py --data data/imagenet --bench --batch-size 512 --workers 4 --metrics-out loader.json

Reads folders of JPEG files only (train/<class>/*.jpg and val/<class>/*.jpg): for CIFAR-10 or other formats use
loader.py. Needs nothing but torchvision; with no GPU it decodes on the CPU, the same code on the CPU device.
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
from torchvision.transforms import v2

import checks
from checks import die

# new # the JPEG decode of torchvision, on the GPU with nvJPEG; a thread of its own decodes a batch ahead of training
import contextlib
import queue
import threading
from torchvision.io import ImageReadMode, decode_jpeg, read_file

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
    # new # nvJPEG decodes JPEG files: CIFAR-10's pickled batches, and any other format, need loader.py
    if dataset == "cifar10":
        die(f"--loader nvjpeg decodes JPEG files, not CIFAR-10 in {root}: leave out --loader nvjpeg to use loader.py")
    for path, _ in train_set.samples + val_set.samples:
        if not path.lower().endswith((".jpg", ".jpeg")):
            die(f"--loader nvjpeg decodes JPEG files: {path} is not one (.jpg, .jpeg); loader.py reads any format")
    info = DataInfo(dataset, train_set.classes, image_size, len(train_set), len(val_set), "nvjpeg")
    return train_set, val_set, info


# -----------------------------------------------------------------------------
# the input pipeline: torchvision's transforms, in DataLoader worker processes (loader_dali.py: DALI's)


# new # the dataset the loading processes read: each image's file as bytes, its label, its index (to name a bad one)
class EncodedImages(torch.utils.data.Dataset):
    def __init__(self, samples):
        self.samples = samples

    # new # its images, and one of them
    def __len__(self):
        return len(self.samples)

    # new # (its bytes, its label, its index)
    def __getitem__(self, i):
        path, label = self.samples[i]
        return read_file(path), label, i


# new # a batch of them in one tensor (one block of shared memory from a loading process, not one a file): the files'
# bytes end to end and each one's length, the labels, the indices
def collate_encoded(batch):
    encoded, labels, indices = zip(*batch)
    return torch.cat(encoded), [len(e) for e in encoded], torch.tensor(labels), list(indices)


# new # the DataLoader of bytes dressed as loader.py's Loader: each batch decoded and transformed on the device by a
# thread of its own (on a CUDA stream of its own), a batch ahead of training; (images, labels), len(), .sampler
class Loader:
    def __init__(self, loader, transform, device, samples, ahead=2):
        self.loader, self.transform, self.device, self.samples = loader, transform, device, samples
        self.sampler, self.ahead = loader.sampler, ahead
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    # new # batches per epoch, like len(DataLoader)
    def __len__(self):
        return len(self.loader)

    # new # an epoch: the thread decodes ahead; a bad file's message or the thread's error ends the run here; where
    # training stops inside the epoch (its last step), the thread is stopped with it
    def __iter__(self):
        batches, stop = queue.Queue(self.ahead), threading.Event()
        thread = threading.Thread(target=self.decode_all, args=(batches, stop), name="nvjpeg-decode", daemon=True)
        thread.start()
        try:
            while (item := batches.get()) is not None:
                if isinstance(item, str):
                    die(item)
                if isinstance(item, BaseException):  # out of memory, say: raised where training is
                    raise item
                images, labels, ready = item
                if ready is not None:  # the compute stream waits for the batch's, and keeps its memory till used
                    torch.cuda.current_stream(self.device).wait_event(ready)
                    images.record_stream(torch.cuda.current_stream(self.device))
                yield images, labels
        finally:
            stop.set()
            while thread.is_alive():
                try:
                    batches.get(timeout=0.1)
                except queue.Empty:
                    pass

    # new # the thread: each batch of bytes decoded on the device at once (nvJPEG on a GPU), each image cropped and
    # flipped alone (their sizes differ), the batch made float and normalised, then handed over with its event
    def decode_all(self, batches, stop):
        try:
            with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
                for flat, lengths, labels, indices in self.loader:
                    if stop.is_set():
                        return
                    try:
                        images = decode_jpeg(
                            list(torch.split(flat, lengths)), mode=ImageReadMode.RGB, device=self.device
                        )
                    except RuntimeError as e:  # which file: found and named (checks.py)
                        batches.put(checks.explain_jpeg_error(e, [self.samples[i][0] for i in indices], read_image))
                        return
                    images = torch.stack([self.transform(image) for image in images])
                    images = v2.functional.normalize(images.float().div_(255), MEAN, STD)
                    ready = torch.cuda.Event() if self.stream is not None else None
                    if ready is not None:
                        ready.record(self.stream)
                    batches.put((images, labels, ready))
            batches.put(None)
        except BaseException as e:  # noqa: B036 (handed to the training thread, which raises it)
            batches.put(e)


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
    small = info.image_size <= SMALL
    # new # loader.py's crops and flips, on the device, on each decoded image (uint8 CHW, their sizes differ); the
    # batch is then made float and normalised at once (Loader.decode_all)
    crop = v2.RandomResizedCrop(info.image_size, scale=(0.35, 1) if small else (0.08, 1), antialias=True)
    train_transform = v2.Compose([crop, v2.RandomHorizontalFlip()])
    resize = v2.Resize(info.image_size if small else 256, antialias=True)
    val_transform = v2.Compose([resize, v2.CenterCrop(info.image_size)])
    common = checks.dataloader_settings(workers, device)  # --workers, --prefetch-factor, --pin-memory, ...
    # new # the loading processes read the files' bytes; the Loader decodes them on the device
    train_bytes = torch.utils.data.DataLoader(
        EncodedImages(train_set.samples),
        batch_size,
        shuffle=sampler is None,
        sampler=sampler,
        drop_last=True,
        collate_fn=collate_encoded,
        **common,
    )
    val_bytes = torch.utils.data.DataLoader(
        EncodedImages(val_set.samples), batch_size, sampler=val_part, collate_fn=collate_encoded, **common
    )
    train_loader = Loader(train_bytes, train_transform, device, train_set.samples)
    val_loader = Loader(val_bytes, val_transform, device, val_set.samples) if keep else []
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

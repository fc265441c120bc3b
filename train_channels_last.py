"""train.py + channels_last: the model's weights and every batch in NHWC memory layout.

A convolution on a GPU's Tensor Cores (or in oneDNN on a CPU) works in channels-last layout; a
model in the default NCHW layout pays for transposes around each one. channels_last stores the
weights and the images that way, so the layout is kept from end to end. The gain is largest with
mixed precision (train_amp.py) on a GPU; on a CPU in fp32 it can be a loss.

    python train_channels_last.py
    python train_channels_last.py --model resnet50 --data ~/imagenet --batch-size 256
"""

import argparse
import contextlib
import importlib.util
import json
import math
import os
import pickle
import platform
import sys
import time

import torch
import torchvision
from torch import nn
from tqdm import tqdm

# -----------------------------------------------------------------------------
# arguments: the same in every train*.py; a variant's own flags come last

SHORT_EVAL = 1000  # a run of --steps evaluates this fixed sample of the validation images unless told otherwise
CURVE_STEPS = 10  # the training loss curve has a point per this many steps: their mean


def count_or_all(text):
    """A whole number, or all (argparse names this function when the text is neither)."""
    return text if text == "all" else int(text)


parser = argparse.ArgumentParser(
    description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
)
parser.add_argument(
    "--data", default="data/small", help="image folder (train/, val/), CIFAR-10 root, or synthetic[:PX[:N]]"
)
parser.add_argument(
    "--model",
    default="resnet18",
    help="a torchvision classification model, or your own: FILE.py:FACTORY, module:FACTORY",
)
parser.add_argument("--batch-size", type=int, default=128, help="global batch: images per step over all processes")
parser.add_argument("--epochs", type=int, default=2, help="passes over the training set")
parser.add_argument("--steps", type=int, default=None, help="stop after this many steps (overrides --epochs)")
parser.add_argument("--warmup-steps", type=int, default=5, help="first steps, left out of the timing")
parser.add_argument("--lr", type=float, default=0.1, help="peak learning rate (SGD; up over 20%% of steps, then down)")
parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="data loading processes")
parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: cuda if present")
parser.add_argument("--seed", type=int, default=0, help="seed of the weights, the data order and the sample")
parser.add_argument(
    "--eval-samples",
    type=count_or_all,
    default=None,
    help=f"validation images evaluated, a fixed sample, or all (default: all, or {SHORT_EVAL} for a --steps run)",
)
parser.add_argument("--loader", default="torchvision", help="torchvision (loader.py) or dali (loader_dali.py)")
parser.add_argument("--download", action="store_true", help="fetch CIFAR-10 into --data if missing")
parser.add_argument("--no-data-check", action="store_true", help="do not check every file (the bench did, once)")
parser.add_argument("--metrics-out", default=None, help="write the run's metrics here as JSON")
parser.add_argument("--no-progress", action="store_true", help="no progress bar")
parser.add_argument(
    "--target-accuracy", type=float, default=None, help="stop at the first evaluation this accurate (0 to 1)"
)
parser.add_argument("--tensorboard", default=None, help="also write the curves and the speed to this folder")
parser.add_argument(
    "--memory-snapshot", default=None, help="CUDA: the allocator's history over 3 steps, for pytorch.org/memory_viz"
)

# -----------------------------------------------------------------------------
# helpers


def die(message):
    """End the run with a one-line error naming the problem, exit code 2."""
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def model_factory(name):
    """What --model names, as factory(num_classes) -> nn.Module: a torchvision model, or the user's own factory
    from `path/to/file.py:factory` or `package.module:factory` (found from the current folder first)."""
    if ":" not in name:
        if name not in torchvision.models.list_models(module=torchvision.models):
            die(
                f"unknown model {name!r}: see torchvision.models.list_models(module=torchvision.models),"
                " or give your own as FILE.py:FACTORY"
            )
        return lambda num_classes: torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    source, _, attr = name.rpartition(":")
    if source.endswith(".py") and not os.path.isfile(source):
        die(f"--model {name}: no file {source}")
    try:
        if source.endswith(".py"):  # its own folder first, as `python FILE.py` would have it
            sys.path.insert(0, os.path.dirname(os.path.abspath(source)))
            spec = importlib.util.spec_from_file_location(os.path.basename(source)[:-3], source)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())
            module = importlib.import_module(source)
    except Exception as e:  # the user's code: whatever it raises ends the run in one line
        die(f"--model {name}: importing {source} failed: {one_line(e)}")
    factory = getattr(module, attr, None)
    if factory is None:
        die(f"--model {name}: {source} has no {attr!r}")
    if not callable(factory):
        die(f"--model {name}: {attr} in {source} is not callable: a {type(factory).__name__}")
    return factory


def one_line(error):
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}"


def build_model(name, factory, num_classes, image_size):
    """factory(num_classes), tried on two images. A torchvision model's stem keeps the resolution of small images
    (<= 64 px): the first conv becomes 3x3 stride 1 and a max-pool right after it goes, as in CIFAR ResNets.
    A model of your own is used as given."""
    try:
        model = factory(num_classes)
    except Exception as e:  # the user's code: whatever it raises ends the run in one line
        die(f"model {name}: factory({num_classes}) raised {one_line(e)}")
    if not isinstance(model, nn.Module):
        die(f"model {name}: factory({num_classes}) returned a {type(model).__name__}, not a torch.nn.Module")
    if not any(p.requires_grad for p in model.parameters()):
        die(f"model {name} has no parameters to train")
    if image_size <= 64 and ":" not in name:
        stem = [n for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.MaxPool2d))][:2]
        conv = model.get_submodule(stem[0])
        replace(model, stem[0], nn.Conv2d(conv.in_channels, conv.out_channels, 3, 1, 1, bias=conv.bias is not None))
        if isinstance(model.get_submodule(stem[1]), nn.MaxPool2d):
            replace(model, stem[1], nn.Identity())
    try:  # one tiny forward pass, so a model that cannot take these images fails here, clearly
        with torch.no_grad():
            out = model(torch.zeros(2, 3, image_size, image_size))
    except Exception as e:
        die(f"model {name} cannot take {image_size} px images: {one_line(e)}")
    if not isinstance(out, torch.Tensor) or out.shape != (2, num_classes):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        die(f"model {name} returns {shape} for 2 images in training mode, not one score per class (2, {num_classes})")
    for module in model.modules():  # undo what the dry run did to batch-norm statistics
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.reset_running_stats()
    return model


def replace(model, name, module):
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent), child, module)


@torch.no_grad()
def evaluate(model, val_loader, device, autocast):
    """Return (accuracy, images counted) over the validation set."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    total = torch.zeros((), dtype=torch.int64, device=device)
    for images, labels in val_loader:
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        images = images.to(memory_format=torch.channels_last)  # new #
        with autocast:
            outputs = model(images)
        correct += (outputs.argmax(1) == labels).sum()
        total += labels.numel()
    return correct.item() / total.item(), total.item()


def cpu_name():
    """The CPU's model as /proc/cpuinfo names it (Linux), else what the platform module knows."""
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.processor() or platform.machine()


def peak_memory_mib(device):
    """(allocated, reserved) peak since the last reset, in MiB; None on a CPU."""
    if device.type != "cuda":
        return None, None
    return torch.cuda.max_memory_allocated(device) / 2**20, torch.cuda.max_memory_reserved(device) / 2**20


def check_numbers(args):
    """Every number a flag gives, in its range, before any work: the flag is named if not."""
    at_least = {"--batch-size": 1, "--epochs": 1, "--steps": 1, "--warmup-steps": 0, "--workers": 0}
    at_least.update({"--eval-samples": 1, "--seed": 0})
    for flag, least in at_least.items():
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None and value != "all" and value < least:
            die(f"{flag} {value}: must be {least} or more")
    cores = os.cpu_count() or 1
    if args.workers > 8 * cores:
        die(f"--workers {args.workers}: at most 8 loading processes per core ({8 * cores} here)")
    if args.seed >= 2**31:
        die(f"--seed {args.seed}: must be below 2**31")
    if not (math.isfinite(args.lr) and args.lr > 0):
        die(f"--lr {args.lr}: the learning rate must be a finite number above 0")
    if args.target_accuracy is not None and not 0 < args.target_accuracy <= 1:
        die(f"--target-accuracy {args.target_accuracy}: a share of the validation images, above 0 and at most 1")


def check_writable(path, what="metrics"):
    """Fail now, not after training, when a file cannot be written."""
    if os.path.isdir(path):
        die(f"cannot write {what} to {path}: it is a folder")
    try:
        with open(path + ".tmp", "w"):
            pass
        os.remove(path + ".tmp")
    except OSError as e:
        die(f"cannot write {what} to {path}: {e.strerror}")


def write_whole(path, what, write):
    """write(file) into path whole (a temporary file, then renamed) or not at all: a full disk ends the run with
    one line, and no partial file is left."""
    try:
        with open(path + ".tmp", "wb") as f:
            write(f)
        os.replace(path + ".tmp", path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(path + ".tmp")
        die(f"cannot write {what} to {path}: {e.strerror or e}")


class Curves:
    """The run's curves, read where the run reads its loss anyway (at each epoch's end, outside the window): the
    training loss as the mean of each CURVE_STEPS steps, and at each evaluation the validation accuracy with the
    training time to it (evaluations left out) and the wall time (from the flags parsed). With --tensorboard
    they are written there as they come, and the speed at the end: `tensorboard --logdir` draws them."""

    def __init__(self, folder):
        self.losses, self.val, self.logged, self.writer = [], [], 0, None
        if folder is None:
            return
        if os.path.exists(folder) and not os.path.isdir(folder):
            die(f"--tensorboard {folder}: not a folder")
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            die("--tensorboard needs the tensorboard package: pip install tensorboard")
        try:
            self.writer = SummaryWriter(folder)
        except OSError as e:
            die(f"--tensorboard {folder}: {e.strerror or e}")

    def loss(self, whole_only=False):
        """[[step, mean loss], ...]: a point per CURVE_STEPS steps at the last of them; a shorter last interval
        too, unless whole_only."""
        chunks = [
            (start, self.losses[start : start + CURVE_STEPS]) for start in range(0, len(self.losses), CURVE_STEPS)
        ]
        return [[start + len(c), sum(c) / len(c)] for start, c in chunks if len(c) == CURVE_STEPS or not whole_only]

    def add(self, losses, epoch, step, val_acc, train_s, wall_s, last):
        """An epoch's end: its steps' losses (floats) and the evaluation after it."""
        self.losses += losses
        self.val.append(dict(epoch=epoch, step=step, val_acc=val_acc, train_s=train_s, wall_s=wall_s))
        if self.writer is not None:
            points = self.loss(whole_only=not last)  # an interval that goes on into the next epoch waits for it
            for at, value in points[self.logged :]:
                self.writer.add_scalar("train/loss", value, at)
            self.logged = len(points)
            self.writer.add_scalar("val/accuracy", val_acc, step)
            self.writer.flush()

    def close(self, samples_per_s, step):
        if self.writer is not None:
            self.writer.add_scalar("train/samples_per_s", samples_per_s, step)
            self.writer.close()


def snapshot():
    """The CUDA allocator's state and recorded history, for pytorch.org/memory_viz; the recording stops."""
    data = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    return data


class Window:
    """The timed window: opened and closed by a synchronize, and nothing inside it waits for the device.

    Each step leaves two marks on the compute stream, its batch ready and its update done: CUDA events,
    read only once the window has closed (host clocks on a CPU, where work is done when a call returns).
    From the previous step's end to this step's batch ready, the device was starved for data (the copy
    included); from the previous end to this end is the step's time. The host's time blocked in the
    loader's next() is counted apart: a host running ahead of the device can wait without starving it.
    Evaluation pauses the window; the time paused is left out.
    """

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.steps, self.wait_s, self.epoch_starts, self.paused_s, self.pauses = [], 0.0, 0, 0.0, 0
        self.opened = self.closed = self.paused = self.last = None

    def mark(self):
        """Now, on the compute stream."""
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def sync(self):
        """Wait for the device; return the host clock."""
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def open(self):
        self.opened, self.last = self.sync(), self.mark()

    def step(self, waited, ready, done, epoch_start):
        """Book a step: the host's wait for its batch, its two marks, whether it began an epoch."""
        if self.opened is not None and self.closed is None:
            self.steps.append((self.last, ready, done))
            self.wait_s += waited
            self.epoch_starts += epoch_start
        self.last = done

    def pause(self):
        if self.opened is not None and self.closed is None:
            self.paused = self.sync()

    def resume(self):
        if self.paused is not None and self.closed is None:
            self.paused_s, self.pauses = self.paused_s + self.sync() - self.paused, self.pauses + 1
            self.paused, self.last = None, self.mark()

    def close(self):
        """Close the window; return (its seconds less the pauses, each step's milliseconds, seconds starved)."""
        self.closed = self.sync()
        ms = (lambda a, b: a.elapsed_time(b)) if self.cuda else (lambda a, b: (b - a) * 1e3)
        step_ms = [ms(last, done) for last, _, done in self.steps]
        starved_s = sum(ms(last, ready) for last, ready, _ in self.steps) / 1e3
        return self.closed - self.opened - self.paused_s, step_ms, starved_s


# -----------------------------------------------------------------------------


def main():
    parser.error = die  # a bad flag ends like any other bad input: one line, exit code 2
    args = parser.parse_args()
    started = time.perf_counter()  # the run's phases are timed too (setup_s, warmup_s, eval_s): where its time goes
    rank, local_rank, world_size = 0, 0, 1  # one process; train_ddp.py reads torchrun's
    is_main = rank == 0
    factory = model_factory(args.model)
    if args.device == "cuda" and not torch.cuda.is_available():
        die(f"--device cuda: torch {torch.__version__} sees no CUDA GPU")
    device = torch.device(f"cuda:{local_rank}" if args.device != "cpu" and torch.cuda.is_available() else "cpu")
    check_numbers(args)
    eval_samples = None if args.eval_samples == "all" else args.eval_samples
    if args.eval_samples is None and args.steps:  # a short run: a fixed sample, not the whole validation set
        eval_samples = SHORT_EVAL
    if args.loader not in ("torchvision", "dali"):
        die(f"--loader {args.loader}: choose torchvision (loader.py) or dali (loader_dali.py)")
    if args.metrics_out and is_main:
        check_writable(args.metrics_out)
    if args.memory_snapshot and is_main:
        check_writable(args.memory_snapshot, "the memory snapshot")
    if args.memory_snapshot and device.type != "cuda":
        die(f"--memory-snapshot records the CUDA allocator's history: this run is on the {device.type}")
    curves = Curves(args.tensorboard if is_main else None)  # the loss and accuracy curves, in the metrics
    torch.manual_seed(args.seed + rank)
    torch.backends.cudnn.benchmark = True

    # the data: loader.py builds it, or loader_dali.py with --loader dali (the same build_loaders)
    if args.loader == "dali":
        from loader_dali import build_loaders
    else:
        from loader import build_loaders
    batch_size = args.batch_size // world_size  # per process
    train_loader, val_loader, info = build_loaders(
        args.data,
        batch_size,
        device,
        args.workers,
        args.seed,
        rank,
        world_size,
        args.download,
        eval_samples,
        check_data=not args.no_data_check,
    )
    model = build_model(args.model, factory, info.num_classes, info.image_size).to(device)
    # new # the weights stored NHWC (channels last), the layout Tensor Cores and oneDNN prefer
    model = model.to(memory_format=torch.channels_last)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    total_steps = args.steps or args.epochs * len(train_loader)
    peak = max(1, total_steps // 5)  # the learning rate climbs for 20% of the steps, then falls to 0
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / peak, (total_steps - step) / max(1, total_steps - peak))
    )
    autocast = torch.amp.autocast(device.type, enabled=False)  # full precision; train_amp.py turns it on
    warmup = args.warmup_steps + (3 if args.memory_snapshot else 0)  # a snapshot records 3 steps after the warm-up
    if warmup >= total_steps:
        recorded = " (+ 3 recorded by --memory-snapshot)" if args.memory_snapshot else ""
        die(f"--warmup-steps {args.warmup_steps}{recorded} leaves none of the {total_steps} steps to time")

    # -----------------------------------------------------------------------------
    # training: the timed window (see Window) opens after the warm-up and closes after the last step;
    # the loss stays on the device, read at the end of each epoch or, with a progress bar, every 50 steps
    epochs = math.ceil(total_steps / len(train_loader))
    window, losses, step, diverged, train_loss_first = Window(device), [], 0, None, None
    first_step_s = None  # the first step alone, in the warm-up: a compiled model compiles in it
    progress = tqdm(total=total_steps, disable=not is_main or args.no_progress, desc="train")
    setup_s, eval_s = time.perf_counter() - started, 0.0  # setup: the data's check, the loaders, the model
    if warmup == 0:
        window.open()
    for epoch in range(epochs):
        model.train()
        waiting = time.perf_counter()
        for i, (images, labels) in enumerate(train_loader):
            if args.memory_snapshot and is_main and step == args.warmup_steps:  # before the window: it slows the steps
                torch.cuda.memory._record_memory_history(max_entries=100_000)
            waited = time.perf_counter() - waiting
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            images = images.to(memory_format=torch.channels_last)  # new #
            if step == 0 and warmup > 0:  # timed apart from its batch ready to its end, outside the window
                first_started = window.sync()
            ready = window.mark()
            with autocast:
                loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            window.step(waited, ready, window.mark(), epoch_start=i == 0)
            losses.append(loss.detach())
            step += 1
            if step == 1 and warmup > 0:
                first_step_s = window.sync() - first_started
            if args.memory_snapshot and is_main and step == warmup:  # open it at pytorch.org/memory_viz
                write_whole(args.memory_snapshot, "the memory snapshot", lambda f: pickle.dump(snapshot(), f))
            if step == warmup:  # the warm-up is over: the memory peaks and the clock start now
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                window.open()
            progress.update()
            if step % 50 == 0 and not progress.disable:  # the one sync in the window, and only with a bar
                progress.set_postfix(loss=f"{losses[-1].item():.3f}", refresh=False)
            if step == total_steps:
                break
            waiting = time.perf_counter()
        # evaluation, outside the window: it pauses for it, or closes after the last step
        if step == total_steps:
            seconds, step_ms, starved_s = window.close()
            progress.close()  # training is done: the bar says so, not evaluation's time as its own
        window.pause()
        evaluating = time.perf_counter()
        val_acc, val_samples = evaluate(model, val_loader, device, autocast)
        eval_s += time.perf_counter() - evaluating
        seen = torch.stack(losses).float()  # the epoch's losses: the first that is not a finite number is kept
        if diverged is None and not seen.isfinite().all():
            diverged = step - len(losses) + 1 + int((~seen.isfinite()).nonzero()[0])
        train_loss, losses = seen[-10:].mean().item(), []
        if train_loss_first is None:  # the first steps' loss: did it learn? (python -m bench --check)
            train_loss_first = seen[:10].mean().item()
        now = time.perf_counter()  # the curves' point: the training time to here, evaluations left out
        curves.add(
            seen.tolist(),
            epoch + 1,
            step,
            val_acc,
            now - started - setup_s - eval_s,
            now - started,
            step == total_steps,
        )
        window.resume()
        if is_main:
            progress.write(f"epoch {epoch + 1}/{epochs}: train loss {train_loss:.3f}, val acc {val_acc:.3f}")
        target = args.target_accuracy
        if target is not None and val_acc >= target and step < total_steps and window.opened is not None:
            seconds, step_ms, starved_s = window.close()  # reached: training ends here (python -m bench --to-accuracy)
            if is_main:
                progress.write(f"val acc {val_acc:.3f} reached --target-accuracy {target}: stopped after {step} steps")
            break
    progress.close()

    # -----------------------------------------------------------------------------
    # metrics: throughput = images in the window / its wall time; memory from every process
    memory = [peak_memory_mib(device)]
    allocated = [m[0] for m in memory if m[0] is not None]
    reserved = [m[1] for m in memory if m[1] is not None]
    images_timed = len(step_ms) * batch_size * world_size
    times = torch.tensor(step_ms, dtype=torch.float64)
    median, p90 = times.quantile(times.new_tensor([0.5, 0.9])).tolist()
    cuda = device.type == "cuda"
    metrics = dict(
        script=os.path.basename(__file__),
        variant="channels_last" if args.loader == "torchvision" else f"channels_last+{args.loader}",  # new #
        world_size=world_size,
        device=device.type,
        device_name=torch.cuda.get_device_name(device) if cuda else cpu_name(),
        model=args.model,
        dataset=info.dataset,
        image_size=info.image_size,
        num_classes=info.num_classes,
        batch_size=batch_size,
        global_batch_size=batch_size * world_size,
        loader=info.loader,
        workers=args.workers,
        steps_timed=len(step_ms),
        window_s=seconds,
        setup_s=setup_s,
        warmup_s=window.opened - started - setup_s,
        first_step_s=first_step_s,
        eval_s=eval_s,
        samples_per_s=images_timed / seconds,
        compute_samples_per_s=images_timed / max(seconds - starved_s, 1e-9),
        step_time_median_ms=median,
        step_time_p90_ms=p90,
        data_wait_frac=window.wait_s / seconds,
        starved_frac=min(starved_s / seconds, 1.0),
        epoch_starts_timed=window.epoch_starts,
        eval_pauses=window.pauses,
        epoch_time_s=info.train_size * seconds / images_timed,
        train_loss_first=train_loss_first,
        train_loss_final=train_loss,
        diverged_step=diverged,
        host_syncs_per_step=0,  # the step reads nothing back from the device; fp16's GradScaler does (train_amp.py)
        val_acc=val_acc,
        val_samples=val_samples,
        peak_mem_allocated_mib=max(allocated, default=None),
        peak_mem_reserved_mib=max(reserved, default=None),
        peak_mem_allocated_sum_mib=sum(allocated) if allocated else None,
        amp_dtype=None,
        memory_format="channels_last",  # new #
        tf32_matmul=torch.backends.cuda.matmul.allow_tf32 if cuda else None,
        tf32_cudnn=torch.backends.cudnn.allow_tf32 if cuda else None,
        seed=args.seed,
        argv=sys.argv,
        torch_version=torch.__version__,
        torchvision_version=torchvision.__version__,
        cuda_version=torch.version.cuda if cuda else None,
        cudnn_version=torch.backends.cudnn.version() if cuda else None,
        dali_version=info.dali_version,
        loss_curve=curves.loss(),
        val_curve=curves.val,
    )
    if is_main:
        curves.close(metrics["samples_per_s"], step)  # --tensorboard: the speed too
        if args.metrics_out:
            write_whole(args.metrics_out, "metrics", lambda f: f.write(json.dumps(metrics, indent=1).encode()))
        memory_text = f"{metrics['peak_mem_allocated_mib']:.0f} MiB allocated" if allocated else "no GPU memory"
        first = f", first step {first_step_s:.2f} s" if first_step_s is not None else ""
        print(
            f"{metrics['script']}: {args.model} on {info.dataset} ({info.image_size} px),"
            f" {device.type} x{world_size}, batch {batch_size * world_size}\n"
            f"  speed   {metrics['samples_per_s']:.1f} samples/s (compute {metrics['compute_samples_per_s']:.1f}),"
            f" step {median:.1f} ms median{first}\n"
            f"  data    wait {metrics['data_wait_frac']:.1%}, starved {metrics['starved_frac']:.1%},"
            f" {window.epoch_starts} epoch starts timed\n"
            f"  result  loss {train_loss:.3f}, val acc {val_acc:.3f} on {val_samples} of {info.val_size} validation"
            f" images\n  memory  {memory_text}"
        )
        if args.eval_samples is None and val_samples < info.val_size:
            print("  (a run of --steps evaluates a fixed sample: --eval-samples all for every image)")
        if diverged is not None:
            print(
                f"{metrics['script']}: warning: the loss stopped being a finite number at step {diverged}: the run"
                " diverged (try a lower --lr), and its speed was measured on meaningless numbers",
                file=sys.stderr,
            )


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:  # a batch that does not fit in memory is bad input too: one line, exit code 2
        if not any(words in str(e) for words in ("out of memory", "can't allocate memory", "can't start new thread")):
            raise
        die(f"out of memory, try a smaller --batch-size: {str(e).splitlines()[0][:300]}")

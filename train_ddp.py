"""train.py + DistributedDataParallel: one process per GPU, gradients all-reduced in backward.

Launched by torchrun, which tells each process its place (RANK, LOCAL_RANK, WORLD_SIZE). Each
process reads its own shard of the data; --batch-size stays the global batch, so each process
takes batch-size / world-size. NCCL between GPUs, gloo between CPU processes. Without torchrun
it trains as a single process.

    torchrun --standalone --nproc-per-node 8 train_ddp.py          # one machine, 8 GPUs
    torchrun --standalone --nproc-per-node 2 train_ddp.py --device cpu   # 2 CPU processes (gloo)
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \
        --rdzv-id job1 train_ddp.py                               # on each of 2 machines
    sbatch slurm/train_ddp.sbatch                                  # Slurm: srun torchrun ...
"""

import argparse
import importlib
import json
import math
import os
import platform
import sys
import time

import torch
import torchvision
from torch import nn
from tqdm import tqdm

# new # the distributed pieces
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

# -----------------------------------------------------------------------------
# arguments: the same in every train*.py; a variant's own flags come last

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", default="data", help="image folder (train/, val/) or CIFAR-10 root")
parser.add_argument("--model", default="resnet18", help="any torchvision classification model")
parser.add_argument("--batch-size", type=int, default=128, help="global batch: images per step over all processes")
parser.add_argument("--epochs", type=int, default=2, help="passes over the training set")
parser.add_argument("--steps", type=int, default=None, help="stop after this many steps (overrides --epochs)")
parser.add_argument("--warmup-steps", type=int, default=5, help="first steps, left out of the timing")
parser.add_argument("--lr", type=float, default=0.1, help="peak learning rate (SGD; up over 20%% of steps, then down)")
parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="data loading processes")
parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: cuda if present")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--loader", default=None, help="read data with loader_LOADER.py (e.g. dali) instead of loader.py")
parser.add_argument("--download", action="store_true", help="fetch CIFAR-10 into --data if missing")
parser.add_argument("--metrics-out", default=None, help="write the run's metrics here as JSON")
parser.add_argument("--no-progress", action="store_true", help="no progress bar")
parser.add_argument("--sync-bn", action="store_true", help="batch-norm statistics over all GPUs")  # new #

# -----------------------------------------------------------------------------
# helpers


def die(message):
    """End the run with a one-line error naming the problem, exit code 2."""
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def build_model(name, num_classes, image_size):
    """A torchvision model by name; for small images (<= 64 px) its stem keeps the resolution:
    the first conv becomes 3x3 stride 1 and a max-pool right after it goes, as in CIFAR ResNets."""
    model = torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    if image_size <= 64:
        stem = [n for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.MaxPool2d))][:2]
        conv = model.get_submodule(stem[0])
        replace(model, stem[0], nn.Conv2d(conv.in_channels, conv.out_channels, 3, 1, 1, bias=conv.bias is not None))
        if isinstance(model.get_submodule(stem[1]), nn.MaxPool2d):
            replace(model, stem[1], nn.Identity())
    try:  # one tiny forward pass, so a model that cannot take these images fails here, clearly
        with torch.no_grad():
            out = model(torch.zeros(2, 3, image_size, image_size))
    except RuntimeError as e:
        die(f"model {name} cannot take {image_size} px images: {str(e).splitlines()[0]}")
    if not isinstance(out, torch.Tensor) or out.shape != (2, num_classes):
        die(f"model {name} does not return one score per class in training mode")
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
        with autocast:
            outputs = model(images)
        correct += (outputs.argmax(1) == labels).sum()
        total += labels.numel()
    # new # each process saw a different part of the validation set: add them up
    if dist.is_initialized():
        dist.all_reduce(correct)
        dist.all_reduce(total)
    return correct.item() / total.item(), total.item()


def peak_memory_mb(device):
    """(allocated, reserved) peak since the last reset, in MiB; None on a CPU."""
    if device.type != "cuda":
        return None, None
    return torch.cuda.max_memory_allocated(device) / 2**20, torch.cuda.max_memory_reserved(device) / 2**20


def check_writable(path):
    """Fail now, not after training, when the metrics cannot be written."""
    try:
        with open(path + ".tmp", "w"):
            pass
        os.remove(path + ".tmp")
    except OSError as e:
        die(f"cannot write metrics to {path}: {e.strerror}")


# -----------------------------------------------------------------------------


def main():
    parser.error = die  # a bad flag ends like any other bad input: one line, exit code 2
    args = parser.parse_args()
    rank, local_rank, world_size = 0, 0, 1
    # new # under torchrun, the environment says which process this is
    if "RANK" in os.environ:
        rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
        world_size = int(os.environ["WORLD_SIZE"])

    is_main = rank == 0
    if args.model not in torchvision.models.list_models(module=torchvision.models):
        die(f"unknown model {args.model!r}: see torchvision.models.list_models(module=torchvision.models)")
    if args.device == "cuda" and not torch.cuda.is_available():
        die(f"--device cuda: torch {torch.__version__} sees no CUDA GPU")
    device = torch.device(f"cuda:{local_rank}" if args.device != "cpu" and torch.cuda.is_available() else "cpu")
    if args.batch_size < 1 or args.epochs < 1 or (args.steps is not None and args.steps < 1):
        die("--batch-size, --epochs and --steps must be >= 1")
    if args.warmup_steps < 0 or args.workers < 0:
        die("--warmup-steps and --workers must be >= 0")
    # new # join the other processes: NCCL between GPUs, gloo between CPU processes
    if args.batch_size % world_size:
        die(f"--batch-size {args.batch_size} does not split evenly over {world_size} processes")
    if args.sync_bn and world_size > 1 and device.type != "cuda":
        die("--sync-bn needs CUDA: SyncBatchNorm has no CPU implementation")
    if world_size > 1:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if args.metrics_out and is_main:
        check_writable(args.metrics_out)
    torch.manual_seed(args.seed + rank)
    torch.backends.cudnn.benchmark = True

    try:
        loader = importlib.import_module(f"loader_{args.loader}" if args.loader else "loader")
    except ModuleNotFoundError as e:
        die(f"--loader {args.loader}: {e}")
    batch_size = args.batch_size // world_size  # per process
    train_loader, val_loader, data = loader.build_loaders(args, batch_size, device, rank, world_size)
    model = build_model(args.model, data["num_classes"], data["image_size"]).to(device)
    # new # a replica per process, kept in step: DDP all-reduces the gradients during backward
    if args.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    if world_size > 1:
        model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)

    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    total_steps = args.steps or args.epochs * len(train_loader)
    peak = max(1, total_steps // 5)  # the learning rate climbs for 20% of the steps, then falls to 0
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / peak, (total_steps - step) / max(1, total_steps - peak))
    )
    autocast = torch.amp.autocast(device.type, enabled=False)  # full precision; train_amp.py turns it on
    if args.warmup_steps >= total_steps:
        die(f"--warmup-steps {args.warmup_steps} leaves none of the {total_steps} steps to time")
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None

    # -----------------------------------------------------------------------------
    # training: each step is timed from the end of the previous one, in two parts:
    # waiting for the batch (data), and forward + backward + update (compute)
    epochs = math.ceil(total_steps / len(train_loader))
    step, step_times, data_times, losses = 0, [], [], []
    progress = tqdm(total=total_steps, disable=not is_main or args.no_progress, desc="train")
    for epoch in range(epochs):
        # new # a new shuffle of every process's shard each epoch (DALI's reader reshuffles itself)
        if isinstance(train_loader.sampler, DistributedSampler):
            train_loader.sampler.set_epoch(epoch)

        model.train()
        t0 = time.perf_counter()
        for images, labels in train_loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            sync()
            t1 = time.perf_counter()
            with autocast:
                loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            sync()
            t2 = time.perf_counter()
            step += 1
            if step > args.warmup_steps:
                step_times.append(t2 - t0)
                data_times.append(t1 - t0)
            elif step == args.warmup_steps and device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            progress.update()
            progress.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
            if step == total_steps:
                break
            t0 = time.perf_counter()
        val_acc, val_samples = evaluate(model, val_loader, device, autocast)
        if is_main:
            progress.write(f"epoch {epoch + 1}/{epochs}: train loss {losses[-1]:.3f}, val acc {val_acc:.3f}")
    progress.close()

    # -----------------------------------------------------------------------------
    # metrics: throughput = all images timed / all time timed; memory from every process
    memory = [peak_memory_mb(device)]
    # new # every process's peak, gathered on all of them
    if world_size > 1:
        memory = [None] * world_size
        dist.all_gather_object(memory, peak_memory_mb(device))

    allocated = [m[0] for m in memory if m[0] is not None]
    reserved = [m[1] for m in memory if m[1] is not None]
    images_timed = len(step_times) * batch_size * world_size
    train_time, data_time = sum(step_times), sum(data_times)
    times = torch.tensor(step_times, dtype=torch.float64)
    median, p90 = times.quantile(times.new_tensor([0.5, 0.9])).tolist()
    cuda = device.type == "cuda"
    metrics = dict(
        script=os.path.basename(__file__),
        variant=f"ddp+{args.loader}" if args.loader else "ddp",  # new #
        world_size=world_size,
        device=device.type,
        device_name=torch.cuda.get_device_name(device) if cuda else platform.processor() or platform.machine(),
        model=args.model,
        dataset=data["dataset"],
        image_size=data["image_size"],
        batch_size=batch_size,
        global_batch_size=batch_size * world_size,
        steps_timed=len(step_times),
        samples_per_s=images_timed / train_time,
        compute_samples_per_s=images_timed / (train_time - data_time),
        step_time_ms_median=median * 1e3,
        step_time_ms_p90=p90 * 1e3,
        data_wait_frac=data_time / train_time,
        epoch_time_s=data["train_size"] * train_time / images_timed,
        train_loss_final=sum(losses[-10:]) / len(losses[-10:]),
        val_acc=val_acc,
        val_samples=val_samples,
        peak_mem_allocated_mb=max(allocated, default=None),
        peak_mem_reserved_mb=max(reserved, default=None),
        peak_mem_allocated_mb_sum=sum(allocated) if allocated else None,
        torch_version=torch.__version__,
        torchvision_version=torchvision.__version__,
        cuda_version=torch.version.cuda if cuda else None,
        cudnn_version=torch.backends.cudnn.version() if cuda else None,
        dali_version=data["dali_version"],
        amp_dtype=None,
        seed=args.seed,
        argv=sys.argv,
        loader=data["loader"],
        workers=args.workers,
        tf32_matmul=torch.backends.cuda.matmul.allow_tf32 if cuda else None,
        tf32_cudnn=torch.backends.cudnn.allow_tf32 if cuda else None,
        sync_bn=args.sync_bn,  # new #
    )
    if is_main:
        if args.metrics_out:
            with open(args.metrics_out + ".tmp", "w") as f:
                json.dump(metrics, f, indent=1)
            os.replace(args.metrics_out + ".tmp", args.metrics_out)
        memory_text = f"{metrics['peak_mem_allocated_mb']:.0f} MiB allocated" if allocated else "no GPU memory"
        print(
            f"{metrics['script']}: {args.model} on {data['dataset']} ({data['image_size']} px),"
            f" {device.type} x{world_size}, batch {batch_size * world_size}: {metrics['samples_per_s']:.1f} samples/s"
            f" (compute {metrics['compute_samples_per_s']:.1f}), step {median * 1e3:.1f} ms median,"
            f" data wait {metrics['data_wait_frac']:.1%}, loss {metrics['train_loss_final']:.3f},"
            f" val acc {val_acc:.3f} on {val_samples} images, {memory_text}"
        )
    # new # leave the process group cleanly
    if world_size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:  # a batch that does not fit in memory is bad input too: one line, exit code 2
        if "out of memory" not in str(e) and "can't allocate memory" not in str(e):
            raise
        die(f"out of memory, try a smaller --batch-size: {str(e).splitlines()[0][:300]}")

"""train.py + torch.compile: the model compiled into fused kernels (TorchDynamo + Inductor).

Compiling happens in the first step, a warm-up step: its time is reported apart (compile_s), what
a user pays on every fresh start unless the compile cache (TORCHINDUCTOR_CACHE_DIR) already holds
the kernels from an earlier run (compile_cache_warm). Evaluation, never timed, runs the same
weights uncompiled. reduce-overhead adds CUDA graphs (GPU only); max-autotune tries kernel variants.
checks.py holds the checks around it that are not the technique: a missing toolchain looked for
(not tried: the first step pays Inductor's whole start), and whether the compile cache was warm.

    python train_compile.py                                  # mode default
    python train_compile.py --compile-mode max-autotune --model resnet50 --data ~/imagenet
"""

import argparse
import importlib
import math
import os

import torch
from torch import nn
from torchvision.models import resnet

import checks
from meter import Meter

# -----------------------------------------------------------------------------
# arguments: the same in every train*.py; a variant's own flags come last

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
parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"], help="sgd (CNNs) or adamw (transformers)")
parser.add_argument("--lr", type=float, default=None, help="peak learning rate (default: 0.1 for SGD, 0.001 for AdamW)")
parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="data loading processes")
parser.add_argument("--prefetch-factor", type=int, default=None, help="batches each loading process keeps ready (2)")
parser.add_argument("--pin-memory", default="auto", choices=["auto", "on", "off"], help="page-locked (auto: on a GPU)")
parser.add_argument("--persistent-workers", default="on", choices=["on", "off"], help="keep the loading processes")
parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="auto: cuda if present")
parser.add_argument("--seed", type=int, default=0, help="seed of the weights, the data order and the sample")
parser.add_argument(
    "--eval-samples",
    type=checks.count_or_all,
    default=None,
    help="validation images evaluated: a fixed sample, all, or 0 for none (default: all, 1000 for a --steps run)",
)
parser.add_argument("--loader", default="torchvision", help="torchvision (loader.py), dali or nvjpeg (loader_NAME.py)")
parser.add_argument("--download", action="store_true", help="fetch CIFAR-10 into --data if missing")
parser.add_argument("--no-data-check", action="store_true", help="do not check every file (the bench did, once)")
parser.error = checks.die  # a bad flag ends like any other bad input: one line, exit code 2
Meter.add_arguments(parser)  # the measuring's own flags: --warmup-steps, --metrics-out, --no-progress, ...
# new # how hard Inductor works: default, reduce-overhead (CUDA graphs), max-autotune (tries kernels)
parser.add_argument("--compile-mode", default="default", choices=["default", "reduce-overhead", "max-autotune"])

# -----------------------------------------------------------------------------
# helpers


def build_model(name, num_classes, image_size):
    """A torchvision model by name, or your own from FILE.py:FACTORY. A torchvision ResNet starts with the last
    batch-norm of each residual branch at zero, every block the identity, as ResNet-50's reference recipes start it
    (Goyal et al. 2017's zero gamma, timm's zero_init_last): otherwise, with few classes, its logits grow a
    hundredfold and its loss several-fold in its first ten steps. For small images (<= 64 px) a torchvision model's
    stem keeps their resolution: the first conv becomes 3x3 stride 1 and a max-pool right after it goes, as in CIFAR
    ResNets. A model of your own is used as given."""
    model = checks.make_model(name, num_classes)
    for block in model.modules() if ":" not in name else ():
        if isinstance(block, (resnet.BasicBlock, resnet.Bottleneck)):
            nn.init.zeros_(block.bn2.weight if isinstance(block, resnet.BasicBlock) else block.bn3.weight)
    if image_size <= 64 and ":" not in name:
        stem = [n for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.MaxPool2d))][:2]
        conv = model.get_submodule(stem[0])
        replace(model, stem[0], nn.Conv2d(conv.in_channels, conv.out_channels, 3, 1, 1, bias=conv.bias is not None))
        if isinstance(model.get_submodule(stem[1]), nn.MaxPool2d):
            replace(model, stem[1], nn.Identity())
    return checks.try_model(model, name, num_classes, image_size)  # one tiny forward pass: it takes these images


def replace(model, name, module):
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent), child, module)


def make_optimizer(name, parameters, lr, **options):
    """SGD with Nesterov momentum, as CNNs are trained, or AdamW with decoupled weight decay, as transformers are."""
    if name == "adamw":
        return torch.optim.AdamW(parameters, lr=lr or 1e-3, weight_decay=0.05, **options)
    return torch.optim.SGD(parameters, lr=lr or 0.1, momentum=0.9, nesterov=True, weight_decay=5e-4, **options)


@torch.no_grad()
def evaluate(model, val_loader, device):
    """Return (accuracy, images counted) over the validation set."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    total = torch.zeros((), dtype=torch.int64, device=device)
    for images, labels in val_loader:
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        with torch.autocast(device.type, enabled=False):  # full precision; train_amp.py evaluates as it trains
            outputs = model(images)
        correct += (outputs.argmax(1) == labels).sum()
        total += labels.numel()
    return correct.item() / max(total.item(), 1), total.item()  # no image (--eval-samples 0): no accuracy


# -----------------------------------------------------------------------------


def main():
    args = parser.parse_args()
    rank, local_rank, world_size = 0, 0, 1  # one process; train_ddp.py reads torchrun's
    device = checks.pick_device(args.device, local_rank)  # the GPU if there is one (unless --device cpu), else cpu
    checks.check_arguments(args)  # the flags in their ranges, the model and the loader known
    meter = Meter(args, device, rank, world_size)  # the run's clock starts; only rank 0 reports
    torch.manual_seed(args.seed + rank)
    torch.backends.cudnn.benchmark = True

    # the data: loader.py finds and batches the images (--loader dali, nvjpeg: loader_dali.py's, loader_nvjpeg.py's)
    loader = importlib.import_module("loader" if args.loader == "torchvision" else f"loader_{args.loader}")
    train_set, val_set, info = loader.open_data(args.data, args.download, check_data=not args.no_data_check)
    batch_size = args.batch_size  # one process takes the whole batch; train_ddp.py gives each its share
    sampler = None  # every image, reshuffled each epoch; train_ddp.py gives each process its own shard
    eval_samples = args.eval_samples  # a short run evaluates a fixed sample; 0, none (a speed run)
    if eval_samples is None:
        eval_samples = 1000 if args.steps else "all"
    workers = checks.workers_of(args)  # --workers and the DataLoader's settings (--prefetch-factor, ...)
    train_loader, val_loader = loader.build_loaders(
        train_set, val_set, info, batch_size, device, workers, args.seed, sampler, rank, world_size, eval_samples
    )

    # the model, the loss, the optimizer (--optimizer), and the learning rate: up for 20% of the steps (the warm-up),
    # then down to 0
    # new # the first step compiles the model: a warm-up step, its time compile_s (the cache of kernels from an
    # earlier run looked at first); the toolchain looked for
    meter.record(compile_mode=args.compile_mode, compile_cache_warm=checks.compile_cache_warm())
    checks.check_compiler(device)

    model = build_model(args.model, info.num_classes, info.image_size).to(device)
    # new # TorchDynamo captures the model's graph, Inductor fuses it into kernels; training runs the compiled
    # module, evaluation (never timed) the same weights uncompiled, which spares compiling its graph too
    compiled = torch.compile(model, mode=args.compile_mode)

    criterion = nn.CrossEntropyLoss()
    optimizer = make_optimizer(args.optimizer, model.parameters(), args.lr)
    total_steps = args.steps or args.epochs * len(train_loader)
    peak = max(1, total_steps // 5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / peak, (total_steps - step) / max(1, total_steps - peak))
    )

    # training, an evaluation after each epoch
    epochs = range(math.ceil(total_steps / len(train_loader)))
    meter.start(info, batch_size, total_steps)  # every check passed: the warm-up steps, then the timed window
    epochs = meter.until_target(epochs)  # with --target-accuracy, training ends at the first epoch to reach it
    step = 0
    for epoch in epochs:
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            meter.batch()  # the batch is on the device: the wait for it ends
            with torch.autocast(device.type, enabled=False):  # full precision; train_amp.py turns autocast on
                loss = criterion(compiled(images), labels)  # new #
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            meter.step(loss)  # the step's time, and its loss (left on the device: reading it would wait)
            step += 1
            if step == total_steps:
                break
        meter.pause()  # evaluation is not timed
        val_acc, val_samples = evaluate(model, val_loader, device)
        meter.evaluated(val_acc, val_samples)  # the epoch's loss and accuracy, printed and kept as curves
    meter.finish()  # the speed, the memory and the result: printed, and written to --metrics-out


if __name__ == "__main__":
    with checks.one_line_errors():  # a batch too large for the memory, a compiler that cannot build: one line
        main()

"""python tools/stable_start.py: the first steps of a torchvision model on a data folder, from torchvision's own
initialisation and from the scripts' (train.py's build_model: a ResNet's residual branches start at zero), the same
seed, data and learning-rate schedule as a run of train.py: each step's training loss and its largest logit.

    python tools/stable_start.py --data data/imagenet --model resnet50 --batch-size 64 --steps 24

A run of --total-steps (142: the fourth GPU run's) warms its learning rate up over a fifth of them, to 0.1 at batch
256 (train.py's SGD); a smaller --batch-size gets that rate scaled by batch / 256 (the linear scaling rule, Goyal et
al. 2017), so that a CPU can show in minutes what a GPU's batch of 256 does. Measured on a 2-core AMD EPYC with
AVX2, resnet50 at batch 64 on the generated imagenet photos (`python tools/stable_start.py`, its defaults,
2026-11-29, 28 minutes; docs/bench.md): from torchvision's initialisation the loss climbed from 2.6 to 4.3-9.5 in
steps 11 to 23 (the largest logit from 1.7 to 160); from the scripts' it fell from 2.4 to 1.65-2.0 (logits under 13)
through step 24.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the scripts, beside tools/

import torch  # noqa: E402
from torch import nn  # noqa: E402

import checks  # noqa: E402
import loader  # noqa: E402
import train  # noqa: E402


def first_steps(model, train_loader, steps, total_steps, lr):
    """[(loss, largest |logit|)] of the first `steps` steps of train.py's loop on model (SGD, its schedule)."""
    criterion = nn.CrossEntropyLoss()
    optimizer = train.make_optimizer("sgd", model.parameters(), lr)
    peak = max(1, total_steps // 5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / peak, (total_steps - step) / max(1, total_steps - peak))
    )
    seen = []
    model.train()
    while len(seen) < steps:
        for images, labels in train_loader:
            outputs = model(images)
            loss = criterion(outputs, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            seen.append((loss.item(), outputs.detach().abs().max().item()))
            if len(seen) == steps:
                break
    return seen


def main(argv=None):
    p = argparse.ArgumentParser(prog="python tools/stable_start.py", description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data/imagenet", help="an image folder (train/, val/)")
    p.add_argument("--model", default="resnet50", help="a torchvision model")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=24, help="the steps shown")
    p.add_argument("--total-steps", type=int, default=142, help="the run's length, which sets the warm-up")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="also write the steps as JSON here")
    args = p.parse_args(argv)
    device = torch.device("cpu")
    lr = 0.1 * args.batch_size / 256  # train.py's SGD rate at batch 256, scaled linearly
    train_set, val_set, info = loader.open_data(args.data, check_data=False)
    found = {}
    for name in "torchvision's", "the scripts'":
        torch.manual_seed(args.seed)
        train_loader, _ = loader.build_loaders(
            train_set, val_set, info, args.batch_size, device, args.workers, args.seed, None, 0, 1, 0
        )
        if name == "torchvision's":
            model = checks.make_model(args.model, info.num_classes)  # as torchvision builds it
        else:
            model = train.build_model(args.model, info.num_classes, info.image_size)
        started = time.perf_counter()
        found[name] = first_steps(model, train_loader, args.steps, args.total_steps, lr)
        print(f"{name} initialisation ({time.perf_counter() - started:.0f} s):", flush=True)
        for step, (loss, logit) in enumerate(found[name], 1):
            print(f"  step {step:3d}  loss {loss:7.2f}  largest logit {logit:7.1f}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(dict(vars(args), lr=lr, steps_seen=found), indent=1) + "\n")


if __name__ == "__main__":
    main()

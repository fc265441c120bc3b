"""python tools/fsdp_probe.py: does FSDP2 learn where the same model unsharded does? The team's probe of one bug.

On the first GPU run (2026-11-25, an H100, torch 2.11) train_fsdp.py over NCCL in one process did not learn (loss
3.93 -> 3.99) where train_ddp.py did (3.95 -> 2.63). This trains examples/smallnet.py on one fixed batch, from the
same initial weights, as the plain model and as FSDP2 in several ways (every block and the root sharded as
train_fsdp.py shards them, the root alone, a for-loop optimizer, cuDNN's autotuner off, AdamW), and prints for each
its first step's gradient norm and weight change and its losses: the way that learns as the plain model does, and
the one that does not, name the cause.

    torchrun --standalone --nproc-per-node 1 tools/fsdp_probe.py --out probe.json     # NCCL on a GPU, gloo on a CPU
"""

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
import smallnet  # noqa: E402

from train_fsdp import blocks, make_optimizer  # noqa: E402

# name, what is sharded (every block and the root, the root alone, nothing), the optimizer's options, the autotuner
WAYS = [
    ("plain", None, "sgd", {}, True),
    ("fsdp", "blocks", "sgd", {}, True),
    ("fsdp, the root alone", "root", "sgd", {}, True),
    ("fsdp, foreach=False", "blocks", "sgd", {"foreach": False}, True),
    ("fsdp, no cudnn.benchmark", "blocks", "sgd", {}, False),
    ("plain, adamw", None, "adamw", {}, True),
    ("fsdp, adamw", "blocks", "adamw", {}, True),
]


def whole(tensor):
    """A sharded tensor (DTensor) gathered whole; a plain one as it is."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def train(base, mesh, batch, shard, optimizer, options, autotune, steps):
    torch.backends.cudnn.benchmark = autotune
    images, labels = batch
    model = copy.deepcopy(base).to(images.device)
    if shard:
        for name in blocks(model) if shard == "blocks" else []:
            fully_shard(model.get_submodule(name), mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = make_optimizer(optimizer, model.parameters(), None, **options)
    criterion, losses, first = nn.CrossEntropyLoss(), [], {}
    for step in range(steps):
        loss = criterion(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if step == 0:
            params = list(model.parameters())
            grads = [whole(p.grad).float() for p in params if p.grad is not None]
            before = [whole(p).detach().float().clone() for p in params]
            first = {
                "parameter type": type(params[0]).__name__,
                "parameters without a gradient": len(params) - len(grads),
                "gradient norm": float(torch.stack([g.norm() for g in grads]).norm()) if grads else 0.0,
            }
        opt.step()
        if step == 0:
            change = [whole(p).detach().float() - b for p, b in zip(model.parameters(), before, strict=True)]
            first["weight change"] = float(torch.stack([c.norm() for c in change]).norm())
        losses.append(loss.item())
    return {**first, "losses": losses}


def die(message):
    print(f"fsdp_probe: error: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30, help="training steps of each way, on the one batch")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--out", type=Path, help="where the JSON of every way goes")
    p.error = die  # bad input: one line, exit code 2
    args = p.parse_args()
    if min(args.steps, args.batch_size, args.image_size) < 1:
        die(f"--steps {args.steps}, --batch-size {args.batch_size}, --image-size {args.image_size}: each 1 or more")
    if "RANK" not in os.environ:
        die("run it under torchrun: torchrun --standalone --nproc-per-node 1 tools/fsdp_probe.py")
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo", device_id=device if device.type == "cuda" else None
    )
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    torch.manual_seed(0)
    base = smallnet.build(10)
    shape = (args.batch_size, 3, args.image_size, args.image_size)
    batch = torch.randn(shape, device=device), torch.randint(0, 10, (args.batch_size,), device=device)
    found = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu"}
    print(found, flush=True)
    began = time.perf_counter()
    for name, shard, optimizer, options, autotune in WAYS:
        try:
            found[name] = train(base, mesh, batch, shard, optimizer, options, autotune, args.steps)
            r = found[name]
            n = len(r["losses"])
            marks = [r["losses"][i] for i in sorted({0, n // 3, 2 * n // 3, n - 1})]
            said = f"grad {r['gradient norm']:.4g}, change {r['weight change']:.4g}"
            said += f", no grad {r['parameters without a gradient']}, loss " + " ".join(f"{x:.3f}" for x in marks)
            print(f"{name:26s} {said}", flush=True)
        except Exception as e:  # noqa: BLE001 -- a way that fails is a finding, the next ways still run
            found[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            print(f"{name:26s} fails: {found[name]['error']}", flush=True)
    print(f"{time.perf_counter() - began:.1f} s", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(found, indent=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

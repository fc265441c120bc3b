"""The catalogue: every row the bench can run, one line each. The planner, the diffs and the report, the check, the
Makefile's `make diff` and the tests read it; adding a technique is its script and one row here (docs/techniques.md
shows the steps).

A row: its name in the bench; the script that runs it and the flags after the script; its tutorial (the base its
script is read against, `make diff V=NAME`) and that tutorial's place among the others (the report's and the
README's order); how it is launched (python, or torchrun: one process per GPU, 2 on a CPU); the workloads that run it
by default (a CNN's, a transformer's, or both: one asked for by name runs on any); whether its speed-up needs 2 GPUs
or more (with fewer its row shows the overhead alone) and whether it does anything without a GPU (DataParallel is a
passthrough there: the bench leaves it out by default, the check still runs it); whether it compiles (one compile
cache per row and bench: the first repeat compiles cold, the rest warm); and, for a row that measures a technique
under another name (the mixed-precision ceiling, DALI's pipeline alone), that technique.

Below the rows, what the rest reads out of them: the command after `python` that runs each row (TRAIN, LOADERS),
the sets of rows by their properties, and the combinations of the whole recipe (all:no-compile, ...): a row name
that switches blocks of train_all.py off. This file imports nothing of the bench but its error (the Makefile runs it
with any Python):

    python3 -m bench.catalogue diff amp      # "train.py train_amp.py": the pair `make diff V=amp` compares
"""

import sys
from dataclasses import dataclass

from bench import BenchError


@dataclass(frozen=True)
class Row:
    name: str
    script: str
    flags: tuple = ()
    base: str = ""  # the tutorial's base: `make diff V=name` is `diff -u base script`; "" for a row with none
    lesson: int = 0  # the tutorial's place in the reading order (1 first); 0 for a row with none
    launch: str = "python"  # or "torchrun"
    workloads: str = "both"  # "cnn", "transformer" or "both"
    several_gpus: bool = False  # its speed-up needs 2 GPUs or more
    on_cpu: bool = True  # False: without a GPU it changes nothing (a passthrough), so the bench leaves it out there
    compiles: bool = False
    measures: str = ""  # the technique a row measures under another name
    kind: str = "train"  # or "loader": a loader's pipeline alone, no training
    twin: str = ""  # the row it computes the same run as, at the same seed (--parity checks their curves match)
    by_default: bool = True  # False: it runs where --variants names it, not in a bench of every row
    on_gpu: bool = True  # False: a GPU's bench of every row leaves it out (--variants names it there)
    peer: str = ""  # a row it answers against as well as the baseline (FSDP against DDP, at the same processes)
    amp: bool = False  # it trains under autocast (its window emulated bf16's on a CPU without it; its ceiling AMP's)
    needs: str = ""  # a module its script needs beyond the pins (DALI's), looked for before a sweep runs it
    # its timed window against the fastest row's, where measured (bench/stages/cost.py): (("gpu", 1.2), ("cpu", 0.75))
    slower: tuple = ()
    says: str = ""  # what its script adds, in the README's table of the scripts (a tutorial's row)
    usage: str = ""  # how to run it there; "" for `python SCRIPT --data DIR` (torchrun's: 8 processes)


# in the order a user needs them, the order they run in and are left out from the end of when the budget is short:
# the ceilings and the baseline, then each technique; DP and DDP, which show only their overhead on one GPU, last
ROWS = [
    Row("synthetic", "train.py", ("--data", "{synthetic}"),  # the ceiling: no data to load
        slower=(("gpu", 1.2), ("gpu-vit", 5.3), ("cpu", 0.75))),
    Row("amp-synthetic", "train_amp.py", ("--data", "{synthetic}"), measures="amp", amp=True),  # mixed precision's
    # the whole recipe's ceiling (amp, channels_last, compile in one process), where named
    Row("all-synthetic", "train_all.py", ("--data", "{synthetic}"), measures="all", compiles=True, by_default=False),
    Row("baseline", "train.py", slower=(("gpu", 1.2), ("gpu-vit", 5.3))),
    Row("amp", "train_amp.py", base="train.py", lesson=3, amp=True,
        says="+ `torch.amp.autocast`, `--amp-dtype bf16` (default where supported) or `fp16` with `GradScaler`"),
    Row("tf32", "train_tf32.py", base="train.py", lesson=10, workloads="transformer",
        slower=(("gpu", 1.2), ("gpu-vit", 2.1), ("cpu", 1.6)),
        says="+ fp32 matmuls and convolutions in TF32 (NVIDIA), or bf16 (oneDNN, CPUs with native bf16)"),
    Row("fused", "train_fused.py", base="train.py", lesson=9, workloads="transformer", twin="baseline",
        slower=(("gpu", 1.2), ("gpu-vit", 5.3)),
        says="+ the optimizer's fused step (`fused=True`, SGD or AdamW)",
        usage="`python train_fused.py --data DIR --optimizer adamw`"),
    Row("channels_last", "train_channels_last.py", base="train.py", lesson=4, workloads="cnn",
        slower=(("gpu", 0.9), ("gpu-vit", 5.3)),
        says="+ the model and every batch in `torch.channels_last` (NHWC) memory format"),
    Row("compile", "train_compile.py", base="train.py", lesson=5, compiles=True,
        slower=(("gpu", 0.75), ("gpu-vit", 4.9)),
        says="+ `torch.compile(model)`, `--compile-mode default\\|reduce-overhead\\|max-autotune`; the first step,"
             " which compiles, is timed apart (`compile_s`)"),
    Row("all", "train_all.py", base="train.py", lesson=7, launch="torchrun", compiles=True, amp=True,
        slower=(("gpu", 0.75), ("gpu-vit", 0.95)),
        says="+ DDP, AMP, channels_last and `torch.compile` at once; `--no-compile`, `--no-channels-last`, `--amp-dtype"
             " none` switch a block off",
        usage="`torchrun --nproc-per-node 8 train_all.py --data DIR` (or `python train_all.py`: no DDP)"),
    Row("dali", "train.py", ("--loader", "dali"), workloads="cnn",  # its tutorial is loader_dali's (below)
        slower=(("gpu", 1.2), ("gpu-vit", 5.3), ("cpu", 0.75))),
    # the JPEG decode on the GPU (its tutorial is loader_nvjpeg's, below): where named, until a GPU run has measured it
    # (a bench of every row fits its GPU budget without it)
    Row("nvjpeg", "train.py", ("--loader", "nvjpeg"), workloads="cnn", on_cpu=False, by_default=False),
    Row("checkpoint", "train_checkpoint.py", base="train.py", lesson=6, twin="baseline",
        slower=(("gpu", 1.6), ("gpu-vit", 6.5), ("cpu", 1.3)),
        says="+ activation checkpointing (`torch.utils.checkpoint`, non-reentrant) over the model's main stages"),
    # the baseline's script again, as a row (an A/A test): no effect by construction, so its answer proves the rule on
    # this machine, within the margin or open, never faster or slower (rules.self_check). A CPU's default: its
    # noise is what the rule must survive; a GPU bench names it (--variants)
    Row("baseline-again", "train.py", on_gpu=False),
    Row("dp", "train_dp.py", base="train.py", lesson=1, workloads="cnn", several_gpus=True, on_cpu=False,
        slower=(("gpu", 1.2), ("gpu-vit", 5.3)),
        says="+ `nn.DataParallel` over every visible GPU; `--batch-size` is split over them"),
    Row("ddp", "train_ddp.py", base="train.py", lesson=2, launch="torchrun", several_gpus=True,
        slower=(("gpu", 1.2), ("gpu-vit", 5.3)),
        says="+ DistributedDataParallel, one process per GPU, `DistributedSampler`, exact distributed evaluation,"
             " `--sync-bn`"),
    Row("fsdp", "train_fsdp.py", base="train.py", lesson=8, launch="torchrun", workloads="transformer",
        several_gpus=True, twin="ddp", peer="ddp", slower=(("gpu", 1.2), ("gpu-vit", 5.3), ("cpu", 1.2)),
        says="+ FSDP2: `fully_shard` per block, then the root; parameters, gradients, optimizer state sharded"),
    Row("loader", "loader.py", kind="loader"),  # the input pipeline alone
    Row("loader_dali", "loader_dali.py", base="loader.py", lesson=11, kind="loader", measures="dali",
        needs="nvidia.dali",
        says="+ an NVIDIA DALI pipeline in place of the `DataLoader`, decoding on the GPU",
        usage="`python train.py --data DIR --loader dali` (any `train*.py`); `python loader_dali.py --data DIR"
              " --bench`"),
    # the JPEG decode on the GPU with torchvision alone: without a GPU it decodes in the training process, on the CPU
    Row("loader_nvjpeg", "loader_nvjpeg.py", base="loader.py", lesson=12, kind="loader", measures="nvjpeg",
        on_cpu=False, says="+ the JPEG decode and crops on the GPU with torchvision alone (nvJPEG)",
        usage="`python train.py --data DIR --loader nvjpeg`; `python loader_nvjpeg.py --data DIR --bench`"),
]  # fmt: skip
BY_NAME = {row.name: row for row in ROWS}


def training():
    """The training rows, by name, in the bench's order."""
    return {row.name: row for row in ROWS if row.kind == "train"}


def loaders():
    """The loader rows (a pipeline alone), by name."""
    return {row.name: row for row in ROWS if row.kind == "loader"}


def usage(row):
    """How to run a tutorial's script, as the README's table of the scripts says it."""
    if row.usage:
        return row.usage
    launch = "torchrun --nproc-per-node 8" if row.launch == "torchrun" else "python"
    return f"`{launch} {row.script} --data DIR`"


def tutorials():
    """Each technique's tutorial in reading order: its name (the technique's) -> (base, script)."""
    rows = sorted((row for row in ROWS if row.base), key=lambda row: row.lesson)
    return {row.measures or row.name: (row.base, row.script) for row in rows}


TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "{nproc}"]
# variant -> the command after `python`: the script and the flags that make the technique, in the catalogue's order
# (the order they run in and are left out from the end of when the budget is short); the sets read from its rows
TRAIN = {
    row.name: [*(TORCHRUN if row.launch == "torchrun" else []), row.script, *row.flags] for row in training().values()
}
LOADERS = {row.name: row.script for row in loaders().values()}
DEFAULT_LOADER = "torchvision"  # the --loader of train*.py's own DataLoader (loader.py)
# each --loader's pipeline alone: the loader row that times it (its `measures`; loader.py the default's)
ALONE = {(row.measures or DEFAULT_LOADER): row.name for row in loaders().values()}
PEERS = {r.name: r.peer for r in ROWS if r.peer}  # a row answered against another row as well as the baseline
DEFAULT = tuple(row.name for row in training().values() if row.by_default)  # the rows of a bench of every row
SELF = "baseline-again"  # the baseline against itself: its answer checks the rule (bench/stages/statistics/rules.py)
MULTI_GPU = {r.name for r in ROWS if r.several_gpus}  # their speed-up needs 2 GPUs or more: the overhead
DISTRIBUTED = {r.name for r in ROWS if r.launch == "torchrun"}  # one process per GPU (2 on a CPU)
COMPILED = {r.name for r in ROWS if r.compiles}  # one compile cache per variant and bench
# a row that computes the same run as another at the same seed, the arithmetic reordered at most (FSDP's sharded step
# is DDP's, recomputed activations are the activations, a fused step is the same step): --parity's twin check
TWINS = {r.name: r.twin for r in ROWS if r.twin}
# the rows a workload runs by default (its variants asked for by name run on any workload): a CNN's the techniques of
# convolutional training, a transformer's those of transformers (channels_last and DALI change nothing there)
TRANSFORMER_ONLY = {r.name for r in ROWS if r.workloads == "transformer"}
CNN_ONLY = {r.name for r in ROWS if r.workloads == "cnn"}
# a combination: train_all.py with some of its blocks switched off, a row of its own named all:SWITCH[:SWITCH...],
# e.g. all:no-ddp:no-compile (AMP + channels_last in one process, the usual single-GPU recipe)
SWITCHES = {"no-ddp": [], "no-amp": ["--amp-dtype", "none"], "no-channels-last": ["--no-channels-last"],
            "no-compile": ["--no-compile"]}  # fmt: skip
PARTS = {
    "no-ddp": "ddp",
    "no-amp": "amp",
    "no-channels-last": "channels_last",
    "no-compile": "compile",
}  # each one's row


# a row over another loader: ROW+LOADER is the row with --loader LOADER (all:no-ddp+nvjpeg: the recipe over the GPU's
# JPEG decode), LOADER one of the loader rows' (dali, nvjpeg)
LOADER_ROWS = {row.flags[1]: row.name for row in ROWS if row.flags[:1] == ("--loader",)}


def with_loader(variant):
    """(the row, the loader) of ROW+LOADER; (variant, None) for any other; a bad one is a BenchError."""
    base, plus, loader = variant.partition("+")
    if not plus:
        return variant, None
    known = (base in TRAIN or base.startswith("all:")) and base != "baseline"
    if loader not in LOADER_ROWS or not known or "--data" in TRAIN.get(base, []) or "--loader" in TRAIN.get(base, []):
        raise BenchError(
            f"variant {variant!r}: ROW+LOADER is a training row over another loader, LOADER one of"
            f" {', '.join(LOADER_ROWS)} (a row of its own already for the baseline: {', '.join(LOADER_ROWS.values())})"
        )
    return base, loader


def combination(variant):
    """The switches of a combination (all:no-compile, ...), () for any other variant; a bad one is a BenchError."""
    variant = with_loader(variant)[0]
    if not variant.startswith("all:"):
        return ()
    switches = variant.split(":")[1:]
    unknown = [s for s in switches if s not in SWITCHES]
    if unknown or not switches or len(set(switches)) < len(switches) or len(switches) == len(SWITCHES):
        why = f"unknown switch {unknown[0]!r}" if unknown else "each switch once, and not all of them"
        raise BenchError(f"variant {variant!r}: {why}; all:SWITCH[:SWITCH...] with switches {', '.join(SWITCHES)}")
    return tuple(switches)


def family(variant):
    """The variant whose script and estimates a row shares: all for a combination, else itself (over its loader)."""
    variant = with_loader(variant)[0]
    return "all" if combination(variant) else variant


def command(variant):
    """The command after `python` that runs a training variant (the placeholders of TRAIN unfilled)."""
    row, loader = with_loader(variant)
    over = ["--loader", loader] if loader else []
    switches = combination(row)
    if not switches:
        return TRAIN[row] + over
    cmd = ["train_all.py"] if "no-ddp" in switches else [*TORCHRUN, "train_all.py"]
    return cmd + [flag for s in switches for flag in SWITCHES[s]] + over


def distributed(variant):
    variant = with_loader(variant)[0]
    switches = combination(variant)
    return variant in DISTRIBUTED if not switches else "no-ddp" not in switches


def compiled(variant):
    variant = with_loader(variant)[0]
    switches = combination(variant)
    return variant in COMPILED if not switches else "no-compile" not in switches


def uses_amp(variant):
    """The row trains under autocast (its catalogue row's amp), unless a combination switches AMP off."""
    row = BY_NAME.get(family(variant))
    return row is not None and row.amp and "no-amp" not in combination(variant)


def slower(variant, kind):
    """A row's timed window against the fastest row's on a kind of machine (gpu, gpu-vit, cpu): its catalogue row's
    `slower`, 1 where none was measured."""
    row = BY_NAME.get(family(variant))
    return dict(row.slower).get(kind, 1) if row is not None else 1


def main(argv):
    if len(argv) == 2 and argv[0] == "diff" and argv[1] in tutorials():
        print(*tutorials()[argv[1]])
        return 0
    print(f"usage: make diff V={'|'.join(tutorials())}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

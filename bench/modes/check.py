"""python -m bench --check (make check): does every technique work on this machine?

A short run of every script and path, a row each: works (and learns: its training loss fell from its
first steps to its last), fails (the reason, in one line), or does not apply here (why). The machine's
capabilities head the table. It is printed and written to OUT/check.md; the exit code is 0 when every
path that applies works, 1 when one fails. What a user runs first on a new machine, and what we run
first on a GPU.

Each path runs as the bench runs its rows (bench/stages/running/launch.py: a process with a time limit, its memory
sampled, through NVML on a GPU) on data/check, a small generated data set (10 classes of 60 training
and 10 validation images, 32 px), with a small model (examples/smallnet.py:build) for 20 steps of 8
images. The compiled paths keep their kernels in OUT/check/compile-cache: the first check compiles
cold, a later one reuses them.
"""

import gzip
import json
import math
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench import BenchError, catalogue, check_folder, data, write_whole
from bench.catalogue import TORCHRUN
from bench.modes import Registration, new_id, this_machine
from bench.outputs import markdown
from bench.outputs.declared import Bullets, Rows
from bench.stages import cost
from bench.stages.planning.planned import Run, Work
from bench.stages.running import execute

MODEL = "examples/smallnet.py:build"
VIT = "examples/vit_small.py:vit_small"  # the CPU's vit workload: a small ViT
DATA = dict(train=60, val=10, size=32, photo=False)  # data/check: 700 images, generated in a few seconds
FLAGS = ["--batch-size", "8", "--steps", "20", "--warmup-steps", "3", "--workers", "1", "--no-progress"]
MEASURED = dict(cpu="as measured on a 2-core CPU", gpu="as measured on an H100")


@dataclass
class Probe:
    """One path of one script: its command after `python`, where it applies, and what its metrics must say."""

    name: str
    cmd: list
    needs: str = ""  # "cuda": a CUDA GPU; "gpus": 2 or more; "" everywhere
    kind: str = "train"
    expect: dict = field(default_factory=dict)  # metric fields that must have these values
    compiled: bool = False
    processes: int = 1


def add_flags(p):
    p.add_argument("--check", action="store_true", help="does every technique work here? a short run of each path")
    p.add_argument(
        "--paths",
        metavar="WORDS",
        help="with --check: only the paths whose name holds one of these words, comma-separated (e.g. dali,fsdp)",
    )


def check_flags(flags, config):
    if flags.paths is not None and not words(flags.paths):
        raise BenchError("--paths names no word: give one or more, comma-separated (e.g. --paths dali,fsdp)")


def words(paths):
    """--paths' words, comma-separated (None: every path)."""
    return None if paths is None else tuple(word for word in paths.split(",") if word.strip())


@dataclass(frozen=True)
class Flags:
    """--check's own flags: the words of the paths to run (--paths; None: every path)."""

    paths: tuple | None = None


def own(flags, config):
    return Flags(words(flags.paths))


def paths(gpus, model=MODEL):
    """Every path, in the order a user meets them; {data} and {snapshot} are filled in when run."""
    device = ["--device", "cuda" if gpus else "cpu"]
    dali = "mixed (GPU)" if gpus else "CPU"
    nccl = [*TORCHRUN[:-1], str(max(gpus, 2)), "train_ddp.py"]
    every = [
        Probe("train.py: the baseline", ["train.py", *device]),
        Probe(f"train_dp.py: DataParallel{'' if gpus else ' (no GPU: a passthrough, so the bench leaves it out)'}",
             ["train_dp.py", *device]),
        Probe("train_ddp.py: DDP over gloo, 2 CPU processes", [*TORCHRUN[:-1], "2", "train_ddp.py", "--device", "cpu"],
             expect=dict(world_size=2), processes=2),
        Probe("train_ddp.py: DDP over NCCL, 1 process", [*TORCHRUN[:-1], "1", "train_ddp.py", *device], "cuda",
             expect=dict(world_size=1)),
        Probe(f"train_ddp.py: DDP over NCCL, {max(gpus, 2)} processes", [*nccl, *device], "gpus",
             expect=dict(world_size=max(gpus, 2)), processes=max(gpus, 2)),
        Probe("train_amp.py: bf16 autocast", ["train_amp.py", "--amp-dtype", "bf16", *device],
             expect=dict(amp_dtype="bf16", host_syncs_per_step=0)),
        Probe("train_amp.py: fp16 autocast + GradScaler", ["train_amp.py", "--amp-dtype", "fp16", *device], "cuda",
             expect=dict(amp_dtype="fp16", host_syncs_per_step=1)),
        Probe("train_channels_last.py", ["train_channels_last.py", *device],
              expect=dict(memory_format="channels_last")),
        Probe("train_compile.py: mode default", ["train_compile.py", *device], expect=dict(compile_mode="default"),
             compiled=True),
        Probe("train_compile.py: reduce-overhead (CUDA graphs)",
             ["train_compile.py", "--compile-mode", "reduce-overhead", *device], "cuda",
             expect=dict(compile_mode="reduce-overhead"), compiled=True),
        Probe("train_checkpoint.py", ["train_checkpoint.py", *device]),
        Probe(f"train_all.py: DDP + AMP + channels_last + compile, {max(gpus, 1)} process{'es' * (gpus > 1)}",
             [*TORCHRUN[:-1], str(max(gpus, 1)), "train_all.py", *device], expect=dict(world_size=max(gpus, 1)),
             compiled=True, processes=max(gpus, 1)),
        Probe("train_fsdp.py: FSDP2 over gloo, 2 CPU processes", [*TORCHRUN[:-1], "2", "train_fsdp.py", "--device",
             "cpu"], expect=dict(world_size=2), processes=2),
        Probe("train_fsdp.py: FSDP2 over NCCL, 1 process", [*TORCHRUN[:-1], "1", "train_fsdp.py", *device], "cuda",
             expect=dict(world_size=1)),
        Probe(f"train_fsdp.py: FSDP2 over NCCL, {max(gpus, 2)} processes",
             [*TORCHRUN[:-1], str(max(gpus, 2)), "train_fsdp.py", *device], "gpus",
             expect=dict(world_size=max(gpus, 2)), processes=max(gpus, 2)),
        Probe("train_fused.py: a fused AdamW step, on a ViT (examples/vit_small.py)",
             ["train_fused.py", "--model", VIT, "--optimizer", "adamw", *device],
             expect=dict(fused_step=True, optimizer="adamw")),
        Probe("train_tf32.py: TF32 matmuls and convolutions", ["train_tf32.py", *device], "cuda",
             expect=dict(matmul_precision="tf32", conv_precision="tf32")),
        Probe("train_tf32.py: bf16 inside oneDNN (fp32 where the CPU has no native bf16)",
             ["train_tf32.py", "--device", "cpu"]),
        Probe(f"train.py --loader dali: DALI, {dali} decoding", ["train.py", "--loader", "dali", *device],
             expect=dict(loader="dali")),
        Probe(f"train.py --loader nvjpeg: torchvision's JPEG decode on the {'GPU (nvJPEG)' if gpus else 'CPU'}",
              ["train.py", "--loader", "nvjpeg", *device], expect=dict(loader="nvjpeg")),
        Probe("train.py --data synthetic: the ceiling", ["train.py", "--data", "{synthetic}", *device],
             expect=dict(dataset="synthetic")),
        Probe("train_amp.py --data synthetic: the mixed-precision ceiling",
             ["train_amp.py", "--data", "{synthetic}", *device], expect=dict(dataset="synthetic")),
        Probe("loader.py --bench: the input pipeline alone", ["loader.py", "--bench", *device], kind="loader"),
        Probe("loader_dali.py --bench: DALI's pipeline alone", ["loader_dali.py", "--bench", *device], kind="loader",
             expect=dict(loader="dali")),
        Probe(f"loader_nvjpeg.py --bench: the JPEG decode on the {'GPU (nvJPEG)' if gpus else 'CPU'} alone",
              ["loader_nvjpeg.py", "--bench", *device], kind="loader", expect=dict(loader="nvjpeg")),
        Probe("train.py --memory-snapshot: the allocator's history", ["train.py", "--memory-snapshot", "{snapshot}",
             *device], "cuda", kind="snapshot"),
        Probe("NVML: GPU memory of the run's processes", ["train.py", *device], "cuda", kind="nvml"),
        Probe("NVML: the GPU's energy over the timed window", ["train.py", *device], "cuda", kind="energy"),
        Probe(f"train.py --profile: torch.profiler after the window ({'CUDA kernels' if gpus else 'CPU'})",
             ["train.py", "--profile", "{trace}", *device], kind="profile"),
    ]  # fmt: skip
    every += from_catalogue(every, device)
    for path in every:
        if path.kind != "loader" and "--model" not in path.cmd:
            path.cmd += ["--model", model]
        path.cmd += FLAGS if path.kind != "loader" else ["--batch-size", "8", "--steps", "20", "--warmup-steps", "3"]
    return every


def from_catalogue(every, device):
    """A path for each technique of the catalogue (a row with a tutorial: its script and its flags; a loader's row:
    its --bench) that no path above runs: a technique is its script and its row, and `make check` runs it."""
    found = []
    for row in catalogue.ROWS:
        wanted = [row.script, *row.flags]
        if not row.base or any(all(part in path.cmd for part in wanted) for path in every):
            continue
        if row.kind == "loader":
            found.append(Probe(f"{row.script} --bench: the {row.name} row's pipeline alone", [*wanted, "--bench",
                               *device], kind="loader"))  # fmt: skip
        else:
            found.append(Probe(f"{' '.join(wanted)}: the {row.name} row", [*wanted, *device]))
    return found


# on a GPU these run first: the paths only a GPU runs, so that a first GPU run cut short has still run them
FIRST_ON_GPU = ("NVML", "--profile", "NCCL", "fp16", "reduce-overhead", "TF32", "fused", "synthetic", "DALI",
                "nvJPEG", "--memory-snapshot")  # fmt: skip


def in_order(every, gpus):
    """The paths in the order they run: a user's order on a CPU; on a GPU the GPU's own paths first."""
    if not gpus:
        return every
    return sorted(every, key=lambda path: not any(word in path.name for word in FIRST_ON_GPU))


def chosen(every, words):
    """The paths whose name holds one of words (--paths); every path where none are given."""
    if not words:
        return every
    found = [path for path in every if any(word.lower() in path.name.lower() for word in words)]
    if not found:
        raise BenchError(f"--paths {','.join(words)}: no path's name holds these words; the paths: "
                         f"{'; '.join(path.name for path in every)}")  # fmt: skip
    return found


def command(path, where, snapshot):
    """The path's command line, on the check's data (where) or on synthetic data of its shape."""
    cmd = [part.format(synthetic="synthetic:32:10", snapshot=snapshot, trace=trace_of(snapshot)) for part in path.cmd]
    return [sys.executable, *cmd, *([] if "--data" in cmd else ["--data", str(where)])]


def trace_of(snapshot):
    """Where the --profile path writes its trace: beside the snapshot, in the check's folder."""
    return str(Path(snapshot).with_name("trace.pt.trace.json.gz"))


def applies(path, gpus):
    """None where the path applies on this machine, else why not."""
    if path.needs == "cuda" and not gpus:
        return "needs a CUDA GPU: none here"
    if path.needs == "gpus" and gpus < 2:
        return f"needs 2 GPUs or more: {gpus or 'none'} here"
    return None


def capabilities(info):
    """The lines that head the table: what decides which paths apply and how fast they can be."""
    isa = info.get("cpu_isa") or "not known"
    bf16 = "native" if info.get("cpu_bf16_native") else "emulated (no AVX-512-BF16 or AMX): bf16 autocast is slow here"
    lines = [f"CPU: {info['cpu_model']}, {info['cpu_cores']} cores; features {isa}; bf16 {bf16}"]
    if info["gpu_count"]:
        native = "native" if info.get("gpu_bf16_native") else "emulated: fp16 is the default"
        tf32 = "TF32 on" if info.get("gpu_tf32") else "no TF32"
        lines.append(f"GPU: {info['gpu_count']}x {info['gpu_name']}, compute capability {info['gpu_capability']}, "
                     f"bf16 {native}, {tf32}; driver {info['driver_version']}")  # fmt: skip
    else:
        lines.append("GPU: none that torch can see (the CUDA paths do not apply)")
    return lines


class PlainData(pickle.Unpickler):
    """Reads plain data only (dicts, lists, numbers, strings): any class or function named in the file is refused, so
    reading it runs no code (the Python documentation's "restricting globals")."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"it names {module}.{name}, not plain data")


def verdict(path, row, snapshot):
    """(result, detail) of a path that ran: works, or fails with the reason."""
    if row["status"] != "ok":
        return "fails", row["error"]
    for name, value in path.expect.items():
        if row.get(name) != value:
            return "fails", f"its metrics say {name}={row.get(name)!r}, not {value!r}"
    rate = f"{row['samples_per_s']:,.0f} {'images' if path.kind == 'loader' else 'samples'}/s"
    if path.kind == "loader":
        return "works", f"{rate} delivered"
    first, final = row.get("train_loss_first"), row.get("train_loss_final")
    if not (isinstance(first, float) and isinstance(final, float) and math.isfinite(final) and final < first):
        return "fails", f"it runs but does not learn: its loss went from {first} to {final}"
    detail = f"loss {first:.2f} -> {final:.2f}, {rate}"
    if path.compiled and not row.get("compiled_steps_timed"):
        return "fails", f"compiled code did not run in the timed window ({row.get('compiled_steps_timed')} steps)"
    if row.get("compile_s") is not None:
        cache = "warm cache" if row.get("compile_cache_warm") else "cold"
        detail += f", compiling {row['compile_s']:.0f} s ({cache}), compiled code in {row['compiled_steps_timed']} of"
        detail += f" {row['steps_timed']} timed steps"
    if path.kind == "snapshot":
        try:
            with open(snapshot, "rb") as f:
                segments = PlainData(f).load()["segments"]
        except (OSError, pickle.UnpicklingError, KeyError, TypeError, EOFError) as e:
            return "fails", f"the snapshot {snapshot} does not load: {e}"
        if not segments:
            return "fails", f"the snapshot {snapshot} holds no memory segment"
        detail = f"{len(segments)} segments, {sum(s['total_size'] for s in segments) / 2**20:,.0f} MiB; {snapshot}"
    if path.kind == "profile":
        trace = trace_of(snapshot)
        try:
            events = json.loads(gzip.decompress(Path(trace).read_bytes()))["traceEvents"]
        except (OSError, ValueError, KeyError, TypeError, EOFError) as e:
            return "fails", f"the trace {trace} does not load: {e}"
        steps = sum(str(e.get("name", "")).startswith("ProfilerStep") for e in events)
        kernels = sum(e.get("cat") == "kernel" for e in events)
        if row.get("profile_steps") != 3 or not steps:
            return "fails", f"the trace holds {steps} steps, its metrics say {row.get('profile_steps')} recorded"
        if row.get("device") == "cuda" and not kernels:
            return "fails", f"the trace {trace} holds no CUDA kernel"
        detail += f"; a trace of {len(events):,} events, {steps} steps" + (f", {kernels:,} kernels" if kernels else "")
    if path.kind == "energy":
        if row.get("energy_j") is None:
            return "fails", f"no energy read: {row.get('energy_source')}"
        detail = (
            f"{row['avg_power_w']:,.0f} W over the window, {row['energy_per_1k_samples_j']:,.1f} J per 1,000 samples"
        )
    if path.kind == "nvml":
        if row.get("nvml_peak_mib") is None:
            return "fails", f"no GPU memory read: {row.get('nvml_method')}"
        detail = f"{row['nvml_peak_mib']:,.0f} MiB ({row['nvml_method']}), GPU sharing: {row.get('gpu_sharing')}"
    return "works", detail


class Check(execute.Mode):
    """The check as a mode of the executor: a run a path; its record says works or fails, and why.
    Its state: the GPUs it planned for, the model, the paths asked (--paths), besides the timeout."""

    name, what = "check", "paths"

    @dataclass(frozen=True)
    class State(execute.State):
        gpus: int = 0
        model: str = MODEL
        paths: tuple | None = None

    def __init__(self, config, info, bench_id, runs, works, state=None):
        super().__init__(config, info, bench_id, runs, works, state)
        gpus = self.state.gpus
        self.every = chosen(in_order(paths(gpus, self.state.model), gpus), self.state.paths)
        self.snapshot = config.outputs.out / "check" / "snapshot.pickle"

    def folder(self):
        return self.config.outputs.out / "check"

    def prepare(self):
        check_folder(self.folder(), "--out")
        data.ensure("check", spec=DATA)

    def do(self, run, job):
        row = job.launch(run)
        if row is None:
            return None
        result, detail = verdict(next(p for p in self.every if p.name == run.variant), row, self.snapshot)
        status = "ok" if result == "works" else "failed"
        return dict(
            run=run.name, variant=run.variant, status=status, result=result, detail=detail, wall_s=row["wall_s"]
        )

    def say(self, run, record):
        return f"{run.variant}: {record['result']}: {record['detail']} ({record['wall_s']:.0f} s)"

    def finish(self, records, unrun, how):
        found = {r["variant"]: (r["result"], r["detail"]) for r in records}
        gpus, results = self.state.gpus, []
        for path in self.every:
            why = applies(path, gpus)
            if why:
                results.append((path.name, "does not apply", why))
            elif path.name in found:
                results.append((path.name, *found[path.name]))
            else:
                reason = next((w for r, w in unrun if r.variant == path.name), "not reached")
                results.append((path.name, "not run", reason))
        text = markdown.drawn(blocks(results, capabilities(self.info)))
        folder = self.folder()
        write_whole(folder / "check.md", lambda tmp: Path(tmp).write_text(f"# python -m bench --check\n\n{text}"))
        failed = [name for name, result, _ in results if result == "fails"]
        ran = [name for name, result, _ in results if result in ("works", "fails")]
        todo = [name for name, result, _ in results if result != "does not apply"]
        print()
        print(text)
        took = sum(r["wall_s"] for r in records) / 60
        print(f"check: {len(ran) - len(failed)} of {len(todo)} paths work here ({took:.1f} min in runs); "
              f"{folder}/check.md")  # fmt: skip
        return 1 if failed else 0


PATHS = (("path", lambda r: r[0]), ("result", lambda r: r[1]), ("detail", lambda r: r[2].replace("|", "/")))


def blocks(results, lines):
    """check.md's page (and what --check prints), as bench/outputs/ draws it: lines about the machine, then a row a path
    ((name, result, detail) each)."""
    return [Bullets(lines), Rows(results, PATHS)]


def main(config, info, bench_id):
    """Plan the paths that apply here and run them through the executor; print and write the table; exit 1 if one
    failed."""
    gpus = info["gpu_count"] if config.gpus is None else config.gpus  # --gpus: the plan of another machine (--dry-run)
    every = chosen(in_order(paths(gpus, config.work.model or MODEL), gpus), config.own.paths)
    todo = [p for p in every if applies(p, gpus) is None]
    minutes = estimate_s(todo, gpus, info.get("cpu_bf16_native", True)) / 60
    for line in capabilities(info):
        print(line)
    source = MEASURED["gpu" if gpus else "cpu"]
    print(f"check: {len(todo)} of {len(every)} paths apply here, about {minutes:.0f} min ({source})", flush=True)
    folder, snapshot = config.outputs.out / "check", config.outputs.out / "check" / "snapshot.pickle"
    if config.dry_run:
        for path in todo:
            print(" ".join(command(path, data.ROOT + "/data/check", snapshot)))
        return
    check_folder(folder, "--out")
    where = data.ensure("check", spec=DATA)
    runs = []
    for i, path in enumerate(every, 1):
        if applies(path, gpus) is None:
            run = Run(f"check-{i:02d}", path.name, "loader" if path.kind == "loader" else "train", 1, path.processes,
                      command(path, where, snapshot), "check")  # fmt: skip
            run.env["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "compile-cache" / f"{i:02d}")  # each path its own
            run.estimate_s = estimate_s([path], gpus, info.get("cpu_bf16_native", True))
            runs.append(run)
    timeout = cost.timeout_s(config.limits.timeout, gpus, "check")
    state = Check.State(gpus=gpus, model=config.work.model or MODEL, paths=config.own.paths, timeout=timeout)
    mode = Check(config, info, bench_id, runs, dict(check=Work(data=str(where))), state)
    execute.start(mode)
    budget = cost.budget_s(config.limits.budget)
    execute.execute(mode, budget, config.limits.chunk)


# --check: a path's seconds; on a CPU as `python -m bench --check` measured them (9 s a path, a compile 35 s more);
# on a GPU as the first GPU run's check measured them (11 to 22 s a path, reduce-overhead's compile 35 s more)
CHECK_S = dict(cpu=dict(run=9, compile=35, process=5, emulated=25), gpu=dict(run=17, compile=35, process=3))


def estimate_s(paths, gpus, bf16_native=True):
    """--check: the paths' seconds (each path: processes, compiled, cmd), bf16 emulated where the CPU has none."""
    seconds_of = CHECK_S["gpu" if gpus else "cpu"]
    seconds = sum(
        seconds_of["run"] + seconds_of["compile"] * p.compiled + seconds_of["process"] * (p.processes - 1)
        for p in paths
    )
    if not gpus and not bf16_native:  # bf16 emulated: the paths that autocast run several times slower
        seconds += seconds_of["emulated"] * sum("train_amp.py" in p.cmd or "train_all.py" in p.cmd for p in paths)
    return seconds


MODE = Registration("check", lambda config: main(config, this_machine(), new_id()), asked=lambda flags: flags.check,
                    add_flags=add_flags, check_flags=check_flags, own=own, executes=Check,
                    only=("paths",))  # fmt: skip

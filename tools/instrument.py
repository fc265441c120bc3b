"""python tools/instrument.py: does the meter change the speed it measures? The team's check of the instrument.

train.py is run as it is and as a copy with every line that names the meter deleted (as tests/test_meter.py
makes it, meter.py not beside it), on synthetic data with the same model, batch and steps, in alternated runs.
Both are timed by one outside clock that is no part of either: a hook after every optimizer step (torch's
register_optimizer_step_post_hook, loaded with the script) synchronizes the device and reads the clock after
step --warmup-steps and after the last step, and does nothing at the other steps. The metered run's own figure
(samples/s over the same steps, its timed window) is set beside the two.

    python tools/instrument.py --device cuda --model resnet50 --batch-size 256 --data synthetic:224:10
    python tools/instrument.py --device cpu --model examples/smallnet.py:build --batch-size 32 --steps 60

Writes OUT/instrument.json (every run's rates, the medians and the differences) and prints them.
"""

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES_THE_METER = re.compile(r"\bmeter\b", re.IGNORECASE)

# loads a training script as a module, times its optimizer steps first..last by the hook, runs it, writes the rate
RUNNER = """
import importlib.util, json, sys, time, weakref
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

path, out, first, last, batch = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
sys.argv = [path, *sys.argv[6:]]
sys.path.insert(0, str(__import__("pathlib").Path(path).parent))
spec = importlib.util.spec_from_file_location("timed", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
stepped, clock = weakref.WeakKeyDictionary(), {}  # steps per optimizer: the training one's (checks.py tries one apart)


def hook(optimizer, *args):
    stepped[optimizer] = stepped.get(optimizer, 0) + 1
    if stepped[optimizer] in (first, last) and stepped[optimizer] not in clock:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        clock[stepped[optimizer]] = time.perf_counter()


register_optimizer_step_post_hook(hook)
module.main()
open(out, "w").write(json.dumps(dict(samples_per_s=(last - first) * batch / (clock[last] - clock[first]))))
"""


def die(message):
    print(f"instrument: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def bare_copy(folder):
    """train.py without the lines that name the meter, beside the modules it imports but meter.py."""
    kept = [line for line in (ROOT / "train.py").read_text().splitlines() if not NAMES_THE_METER.search(line)]
    (folder / "train.py").write_text("\n".join(kept) + "\n")
    for module in ("loader.py", "checks.py", "cpu.py"):
        shutil.copy(ROOT / module, folder / module)
    return folder / "train.py"


def model_arg(model):
    """A model of one's own (FILE.py:factory) by its whole path: the bare copy runs in a folder of its own."""
    file, colon, factory = model.partition(":")
    return f"{(ROOT / file).resolve()}:{factory}" if colon and file.endswith(".py") else model


def timed(script, out, args, log, metered):
    """The rate the hook measured over steps --warmup-steps..--steps (and the meter's own, metered)."""
    flags = ["--data", args.data, "--model", model_arg(args.model), "--batch-size", str(args.batch_size), "--steps",
             str(args.steps), "--workers", "0", "--device", args.device, "--seed", "0"]  # fmt: skip
    if metered:
        flags += ["--warmup-steps", str(args.warmup_steps), "--no-progress", "--metrics-out", str(out) + ".metrics"]
    cmd = [sys.executable, "-c", RUNNER, str(script), str(out), str(args.warmup_steps), str(args.steps),
           str(args.batch_size), *flags]  # fmt: skip
    done = subprocess.run(cmd, cwd=script.parent, capture_output=True, text=True)
    log.write(f"$ {' '.join(cmd[:2])} RUNNER {' '.join(cmd[3:])}\n{done.stdout}{done.stderr}\n")
    if done.returncode:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        die(f"a run failed (exit code {done.returncode}): {lines[-1][:300]}")
    rate = json.loads(Path(out).read_text())["samples_per_s"]
    own = json.loads(Path(str(out) + ".metrics").read_text())["samples_per_s"] if metered else None
    return rate, own


def main(argv=None):
    p = argparse.ArgumentParser(prog="python tools/instrument.py", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--data", default="synthetic:224:10")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--steps", type=int, default=120, help="steps of each run, the warm-up included")
    p.add_argument("--warmup-steps", type=int, default=20, help="steps before the timing starts (both scripts)")
    p.add_argument("--rounds", type=int, default=3, help="alternated rounds: each runs both scripts once")
    p.add_argument("--out", default="results/instrument")
    p.error = die  # bad input: one line, exit code 2
    args = p.parse_args(argv)
    if not 1 <= args.warmup_steps < args.steps or args.rounds < 1:
        die(f"--warmup-steps {args.warmup_steps}, --steps {args.steps}, --rounds {args.rounds}: 1 <= warm-up < steps,"
            " and 1 round or more")  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rates = dict(bare=[], metered=[], own=[])
    with tempfile.TemporaryDirectory() as tmp, open(out / "instrument.log", "w") as log:
        scripts = dict(bare=bare_copy(Path(tmp)), metered=ROOT / "train.py")
        for i in range(args.rounds):
            for which in ("metered", "bare") if i % 2 == 0 else ("bare", "metered"):
                rate, own = timed(scripts[which], Path(tmp) / f"{which}-{i}.json", args, log, which == "metered")
                rates[which].append(rate)
                rates["own"] += [own] if own is not None else []
                said = f", its own window {own:,.1f}" if own is not None else ""
                print(f"round {i + 1}: {which}: {rate:,.1f} samples/s by the hook{said}", flush=True)
    medians = {which: statistics.median(values) for which, values in rates.items()}
    found = dict(
        model=args.model,
        data=args.data,
        batch_size=args.batch_size,
        device=args.device,
        device_name=device_name(args.device),
        steps=args.steps,
        warmup_steps=args.warmup_steps,
        rates=rates,
        medians=medians,
        metered_vs_bare_pct=100 * (medians["metered"] / medians["bare"] - 1),
        own_vs_bare_pct=100 * (medians["own"] / medians["bare"] - 1),
    )
    (out / "instrument.json").write_text(json.dumps(found, indent=1) + "\n")
    print(f"\n{args.model}, batch {args.batch_size}, {args.data}, {found['device_name']}: samples/s, median of"
          f" {args.rounds} (steps {args.warmup_steps} to {args.steps})")  # fmt: skip
    print(f"  without the meter, by the hook: {medians['bare']:,.1f}")
    print(f"  with the meter, by the hook:    {medians['metered']:,.1f} ({found['metered_vs_bare_pct']:+.2f}%)")
    print(f"  with the meter, its own window: {medians['own']:,.1f} ({found['own_vs_bare_pct']:+.2f}%)")
    return found


def device_name(device):
    if device != "cuda":
        return "cpu"
    import torch

    return torch.cuda.get_device_name(0)


if __name__ == "__main__":
    main()

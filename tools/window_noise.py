"""python tools/window_noise.py: would shorter windows, alternated more often, cut the noise of a paired answer?

The bench pairs each row's run with a baseline run beside it, one window of about 25 timed steps each. Shorter runs
of the two arms, alternated more often, cut the noise an answer gets from the same minutes where it is drift (the
machine slowing and speeding: nearer neighbours share more of it) or each run's own (a shorter run buys more draws a
minute), and widen it where it is the steps' jitter (a shorter window averages fewer steps and pays more starts).

This measures it. The baseline's own command (train.py, the bench's small workload) is run against itself in pairs,
A then B, at each count of timed steps, the counts in a shuffled order in each block, so that every window length sees
the same machine; a row is written to --out as each run ends. Read: each length's noise a pair (the sd of log(A/B)),
its seconds a pair, and the sd of a mean after ten minutes of such pairs (the width an answer gets from the same
time). --lags reads drift from a bench's own runs: its baseline runs two by two, by the seconds between them.

    python tools/window_noise.py --data data/small --out window_noise.csv   # this machine, about 10 minutes
    python tools/window_noise.py --read window_noise.csv                    # its table again
    python tools/window_noise.py --made-up                                  # the arithmetic on made-up costs
    python tools/window_noise.py --lags results/runs.csv                    # drift: a bench's baseline runs by lag
"""

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the bench package, beside tools/
from bench.stages.records import record  # noqa: E402

WARMUP = 5  # the bench's warm-up steps before a window (bench/stages/cost.py WARMUP_STEADY's small workload)
WORKLOAD = [
    "--model", "shufflenet_v2_x0_5", "--batch-size", "64", "--workers", "1", "--eval-samples", "500",
    "--device", "cpu", "--seed", "0", "--no-progress", "--no-data-check",
]  # fmt: skip
TEN_MINUTES = 600.0


def draw_var(run_sd, step_sd, drift, timed, wall_s):
    """The variance of one pair's log ratio: each run's own noise, its steps' jitter averaged over its window, and the
    drift between two runs a run apart (variance a second of lag)."""
    return 2 * run_sd**2 + 2 * step_sd**2 / timed + drift * wall_s


def after_ten_minutes(overhead_s, step_s, run_sd, step_sd, drift, timed):
    """(seconds a pair, sd of one pair, sd of the mean of the pairs ten minutes hold) at `timed` steps a window."""
    wall = overhead_s + timed * step_s
    one = math.sqrt(draw_var(run_sd, step_sd, drift, timed, wall))
    return 2 * wall, one, one / math.sqrt(TEN_MINUTES / (2 * wall))


def made_up(overhead_s, step_s, timed=(6, 12, 25, 50, 100)):
    """The sd after ten minutes, by window, where the noise is the run's, the steps' or drift's alone, each at 0.07
    a pair at the bench's 25 steps (the noise the 2-core EPYCs show)."""
    wall25 = overhead_s + 25 * step_s
    cases = {
        "the run's own": (0.07 / math.sqrt(2), 0.0, 0.0),
        "the steps' jitter": (0.0, 0.07 * math.sqrt(25 / 2), 0.0),
        "drift": (0.0, 0.0, 0.07**2 / wall25),
    }
    rows = []
    for name, (run_sd, step_sd, drift) in cases.items():
        for n in timed:
            pair_s, one, ten = after_ten_minutes(overhead_s, step_s, run_sd, step_sd, drift, n)
            rows.append(dict(noise=name, timed=n, pair_s=pair_s, pair_sd=one, sd_10min=ten))
    return pd.DataFrame(rows)


def read(runs):
    """Each window length's pairs: their count, median window and wall, the sd of log(A/B), the sd after ten
    minutes of such pairs."""
    runs = runs.dropna(subset=["samples_per_s"])
    arms = runs.pivot_table(index=["block", "timed"], columns="arm", values="samples_per_s").dropna()
    ratio = np.log(arms["A"] / arms["B"]).rename("log_ratio").reset_index()
    rows = []
    for timed, one in ratio.groupby("timed"):
        mine = runs[runs["timed"] == timed]
        wall = float(mine["wall_s"].median())
        sd = float(one["log_ratio"].std())
        rows.append(dict(timed=int(timed), pairs=len(one), window_s=float(mine["window_s"].median()), wall_s=wall,
                         pair_sd=sd, sd_10min=sd / math.sqrt(TEN_MINUTES / (2 * wall))))  # fmt: skip
    return pd.DataFrame(rows)


LAGS = (0, 30, 60, 120, 240, 480, 960, math.inf)  # seconds between two baseline runs' starts, the bins' edges


def by_lag(runs):
    """Drift in a bench's own runs: the sd of log(a/b) of its baseline runs (the baseline against itself's too), two by
    two, binned by the seconds between their starts. Flat: each run's noise is its own, and a nearer neighbour shares
    none of it; rising: drift, which alternating more often would pair out."""
    mine = runs[runs["variant"].isin(["baseline", "baseline-again"]) & (runs["kind"] == "train")]
    mine = mine[(mine["status"] == "ok") & ~mine["busy"].eq(True)].dropna(subset=["samples_per_s"])
    start = (pd.to_datetime(mine["time_utc"], utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    rate = np.log(mine["samples_per_s"].to_numpy(float))
    first, second = np.triu_indices(len(rate), k=1)
    pairs = pd.DataFrame(dict(lag=np.abs(start[second] - start[first]), log_ratio=rate[second] - rate[first]))
    pairs["lag_s"] = pd.cut(pairs["lag"], LAGS, right=False)
    rows = pairs.groupby("lag_s", observed=True)["log_ratio"].agg(
        pairs="count", pair_sd=lambda x: np.sqrt((x**2).mean())
    )
    return rows.reset_index().assign(lag_s=lambda t: t["lag_s"].astype(str))


def run_once(data, timed, python):
    """One run of the baseline's command with `timed` steps in its window: (wall seconds, its metrics)."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "m.json"
        command = [python, str(ROOT / "train.py"), "--data", str(data), "--steps", str(WARMUP + timed)]
        command += ["--warmup-steps", str(WARMUP), *WORKLOAD, "--metrics-out", str(metrics)]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0 or not metrics.exists():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"window_noise: train.py failed ({done.returncode}): {tail}")
        return wall, json.loads(metrics.read_text())


def measure(data, out, timed, blocks, seed, python=sys.executable):
    """Alternated pairs, A then B, every length once a block in a shuffled order; a row a run appended to `out`."""
    order = random.Random(seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    for block in range(blocks):
        lengths = list(timed)
        order.shuffle(lengths)
        for n in lengths:
            for arm in "AB":
                wall, m = run_once(data, n, python)
                row = dict(block=block, timed=n, arm=arm, wall_s=wall, window_s=m.get("window_s"),
                           samples_per_s=m.get("samples_per_s"))  # fmt: skip
                pd.DataFrame([row]).to_csv(out, mode="a", header=not out.exists(), index=False)
        print(f"block {block + 1} of {blocks}", flush=True)


def show(table):
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def counts(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of step counts: {text!r}") from None
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"each window holds at least 2 timed steps: {text!r}")
    return values


def positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"at least 2 blocks, for an sd: {text!r}")
    return value


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None):
    p = Parser(prog="python tools/window_noise.py", description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, help="the bench's small data folder (make data)")
    p.add_argument("--out", type=Path, default=Path("window_noise.csv"), help="the runs, a row each")
    p.add_argument("--timed", type=counts, default=[12, 25, 50], help="timed steps a window, each length a pair")
    p.add_argument("--blocks", type=positive, default=8, help="pairs of each length")
    p.add_argument("--seed", type=int, default=0, help="the order of the lengths in each block")
    p.add_argument("--read", type=Path, help="print the table of a --out file, run nothing")
    p.add_argument("--lags", type=Path, help="print a bench's baseline runs' noise by lag (its runs.csv), run nothing")
    p.add_argument("--made-up", action="store_true", help="print the arithmetic on made-up costs, run nothing")
    p.add_argument("--overhead", type=float, default=5.0, help="--made-up: a run's seconds outside its window")
    p.add_argument("--step-s", type=float, default=0.17, help="--made-up: a step's seconds")
    args = p.parse_args(argv)
    if args.made_up:
        if args.overhead < 0 or args.step_s <= 0:
            p.error("--overhead is at least 0 and --step-s above 0")
        show(made_up(args.overhead, args.step_s))
        return
    if args.lags:
        if not args.lags.is_file():
            p.error(f"no file {args.lags}")
        show(by_lag(record.read_runs(args.lags)))
        return
    if args.read:
        if not args.read.is_file():
            p.error(f"no file {args.read}")
        show(read(pd.read_csv(args.read)))
        return
    if args.data is None or not args.data.is_dir():
        p.error(f"--data: no folder {args.data} (make data writes data/small)")
    if args.out.exists():
        p.error(f"--out {args.out} exists: give a new file")
    measure(args.data, args.out, args.timed, args.blocks, args.seed)
    show(read(pd.read_csv(args.out)))


if __name__ == "__main__":
    main()

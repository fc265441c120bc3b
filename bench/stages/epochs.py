"""Epoch starts in a timed window, no more often than in real training.

An epoch starts with a refill: the loader's processes begin the new epoch's batches only when its first one is asked
for, so the first step of an epoch waits for a whole batch to be read, decoded and augmented (1.5 to 2.6 s a run on
the H200 of 2026-11-27, whatever the row). Real training pays that once an epoch: ImageNet at batch 256 once in
5,004 steps. A generated workload stands for a real data set (bench/data.py's WORKLOADS: imagenet for ImageNet-1k,
small for CIFAR-10), which may be far larger than itself: the generated imagenet's epoch is 156 steps at batch 256.
A window timed across its epochs would hold epoch starts far more often than training on the real set would, and
read a fast row slower than its steady steps and its wait as data-bound (the fourth H200 run: every window held one,
64 times ImageNet's rate).

The rule: a window of T timed steps may hold T // E epoch starts, E the real set's steps an epoch at the global batch
(none in a window shorter than an epoch of the real set). A user's own folder stands for itself: its epochs are its
real ones. The planner keeps each window inside an epoch of the data it trains on where steps the bench chose allow
it (fit: the timed steps cut to the epoch's end, MIN_TIMED of them at least); where they do not (a tiny folder, steps
the user gave), the plan, the row and the summary say so. Every run records its epoch starts and the wait they
cost apart from the steady wait (meter.py's epoch_start_wait_s, data_wait_steady_frac), which every verdict about
data reads; bench/stages/statistics/summarize.py reads a run whose window held more starts than allowed at its steady
steps."""

import math
from dataclasses import dataclass

from bench import data

MIN_TIMED = 20  # the fewest timed steps a window is cut to, to keep it inside an epoch


@dataclass(frozen=True)
class Real:
    """The real data set a workload stands for, as its training set's images."""

    name: str
    images: int


def real_set(workload, gpu, train_size=None):
    """The Real data set a workload stands for: a generated workload's (bench/data.py's stands_for; vit: the data it
    trains on on this kind of machine), a user's own folder itself (train_size images), None where neither is known."""
    stands_for = data.STANDS_FOR.get(data.data_workload(workload, gpu))
    if stands_for is not None:
        return Real(*stands_for)
    return Real("its own data", train_size) if train_size else None


def epoch_steps(images, global_batch):
    """Steps an epoch of images at global_batch, the last partial batch dropped (as the loaders do); None unknown."""
    if not images or not global_batch:
        return None
    return max(1, int(images) // int(global_batch))


def starts(warmup, steps, epoch):
    """Epoch starts in the window of steps warmup .. steps - 1 (step 0, the first, starts the first epoch): the k >= 0
    with warmup <= k x epoch < steps."""
    if not epoch or steps <= warmup:
        return 0
    return (steps - 1) // epoch - (math.ceil(warmup / epoch) - 1)


def allowed(timed, real_epoch):
    """Epoch starts a window of timed steps may hold: as many as training on the real set would, timed // its epoch."""
    if not real_epoch:
        return math.inf
    return int(timed) // int(real_epoch)


@dataclass(frozen=True)
class Window:
    """Where a workload's timed windows lie against its epochs."""

    warmup: int
    steps: int
    epoch: int | None  # steps an epoch of the data trained on (None: not known)
    real: str  # the real data set the workload stands for
    real_epoch: int | None  # steps an epoch of it
    starts: int  # epoch starts in each window
    allowed: float  # ... that the real set allows
    cut_from: int | None = None  # the steps before fit cut them (None: not cut)
    given: bool = False  # the steps are the user's (--steps): kept

    @property
    def over(self):
        """The window holds more epoch starts than training on the real set would."""
        return self.starts > self.allowed

    def words(self):
        """The plan's line: where the windows lie and why."""
        timed = self.steps - self.warmup
        if self.epoch is None:
            return f"steps {self.warmup + 1} to {self.steps}: the data's epoch is not known"
        real = f"{self.real}'s epoch is {self.real_epoch:,} steps at this batch" if self.real_epoch else self.real
        where = f"steps {self.warmup + 1} to {self.steps} of epochs of {self.epoch:,} steps"
        if self.cut_from is not None:
            where += f" (cut from {self.cut_from} to end inside the first epoch)"
        held = "no epoch start" if not self.starts else f"{self.starts} epoch start{'' if self.starts == 1 else 's'}"
        if not self.over:
            return f"{where}: {held} in a window of {timed}, as training on it would hold ({real})"
        why = "the steps were given (--steps)" if self.given else f"an epoch holds fewer than {MIN_TIMED} timed steps"
        rate = self.real_epoch / (timed / self.starts) if self.real_epoch else math.nan
        often = f", {rate:.0f} times as often as training on it would" if rate >= 1.5 else ""
        return (
            f"{where}: {held} in a window of {timed}{often} ({real}; {why}): those rows are read at their steady"
            " steps, and their summary says so"
        )


def window(warmup, steps, images, global_batch, real, given=False, cut_from=None):
    """The Window of runs of warmup and steps on images at global_batch, standing for the Real set real."""
    epoch = epoch_steps(images, global_batch)
    real_epoch = epoch_steps(real.images, global_batch) if real else None
    name = real.name if real else "not known"
    return Window(warmup, steps, epoch, name, real_epoch, starts(warmup, steps, epoch),
                  allowed(steps - warmup, real_epoch), cut_from, given)  # fmt: skip


def fit(warmup, steps, images, global_batch, real, given=False):
    """The Window of a workload's runs: warmup and steps as asked, where their windows hold no more epoch starts than
    the real set allows; else, where the bench chose the steps (not given) and an epoch of the data holds warmup and
    MIN_TIMED steps, the steps cut to end inside the first epoch; else as asked, and said (Window.over)."""
    asked = window(warmup, steps, images, global_batch, real, given)
    if not asked.over or given or asked.epoch is None or asked.epoch - warmup < MIN_TIMED or warmup < 1:
        return asked
    return window(warmup, asked.epoch, images, global_batch, real, given, cut_from=steps)

"""Energy over a run's timed window, from the counters the hardware keeps, read by the sampler
(bench/observe/sample.py).

GPU (NVML): nvmlDeviceGetTotalEnergyConsumption, the millijoules each GPU the run sees has used since its driver
loaded (Volta and later; a MIG instance has no counter of its own, and its GPU's would count the other instances'
work: none then), and each one's enforced power limit. CPU (Linux powercap, RAPL): energy_uj of each CPU package
(/sys/class/powercap/intel-rapl:N, AMD's too), a counter of microjoules that goes back to 0 at its zone's
max_energy_range_uj; many virtual machines expose none. The package counter is the whole package's: every process
on it counts, and so does its idle power. A GPU run is given its GPUs' energy alone (the host's is not added).

Each counter is read at each of the sampler's samples (every 0.2 s) and at the end, with the wall clock. The energy of
the window is the counter at the window's edges, interpolated between the two readings around each edge, summed over
the window's spans (the meter's timed_spans: its evaluation pauses left out). A counter that cannot be read, or that
goes backwards where it cannot wrap, or that did not move over the window (a window shorter than its updates), gives
no figure: the cells are empty and energy_source says why, never a guess.
"""

import bisect
import os
import time
from pathlib import Path

from bench.observe.nvml import Unavailable, call

POWERCAP = Path("/sys/class/powercap")  # BENCH_POWERCAP=DIR reads another tree (a fake counter: the tests)


class Unreadable(Exception):
    """No counter to read, or one that cannot be trusted: the reason, in a few words."""


class GPUs:
    """NVML's total energy of the GPUs the run sees, in joules since the first reading."""

    def __init__(self, handles):
        if not handles:
            raise Unreadable("no GPU that NVML can read")
        self.handles, self.last, self.total = handles, None, 0.0
        self.read()
        try:
            self.limit_w = sum(call("nvmlDeviceGetEnforcedPowerLimit", h) for h in handles) / 1e3
        except (Unavailable, AttributeError):
            self.limit_w = None
        self.source = f"NVML total energy of {len(handles)} GPU{'s' if len(handles) > 1 else ''}"

    def read(self):
        try:
            now = [call("nvmlDeviceGetTotalEnergyConsumption", h) for h in self.handles]
        except (Unavailable, AttributeError) as e:
            raise Unreadable(f"NVML gives no energy counter here ({e})") from None
        if self.last is not None:
            if any(b < a for a, b in zip(self.last, now)):
                raise Unreadable("NVML's energy counter went backwards (the driver reloaded?)")
            self.total += sum(b - a for a, b in zip(self.last, now)) / 1e3
        self.last = now
        return self.total


class Packages:
    """The CPU packages' energy (powercap's RAPL zones), in joules since the first reading, wraps undone."""

    def __init__(self, root=None):
        root = Path(root or os.environ.get("BENCH_POWERCAP") or POWERCAP)
        zones = sorted(z for z in root.glob("*-rapl:*") if z.name.count(":") == 1)  # packages, not their parts
        if not zones:
            raise Unreadable(f"no RAPL package counter in {root} (many virtual machines expose none)")
        self.zones, self.last, self.total = zones, None, 0.0
        try:
            self.ranges = [int((z / "max_energy_range_uj").read_text()) for z in zones]
        except (OSError, ValueError):
            self.ranges = [None] * len(zones)
        self.read()
        names = []
        for z in zones:
            try:
                names.append((z / "name").read_text().strip())
            except OSError:
                names.append(z.name)
        try:
            self.limit_w = sum(int((z / "constraint_0_power_limit_uw").read_text()) for z in zones) / 1e6
        except (OSError, ValueError):
            self.limit_w = None
        self.source = f"RAPL {', '.join(names)} (powercap; the whole CPU package)"

    def read(self):
        try:
            now = [int((z / "energy_uj").read_text()) for z in self.zones]
        except (OSError, ValueError) as e:
            raise Unreadable(f"the RAPL counter cannot be read ({getattr(e, 'strerror', None) or e})") from None
        if self.last is not None:
            for a, b, top in zip(self.last, now, self.ranges):
                if b < a and not top:
                    raise Unreadable("the RAPL counter went backwards and its zone gives no max_energy_range_uj")
                self.total += ((b - a) if b >= a else (top - a + b)) / 1e6  # one wrap at most between two readings
        self.last = now
        return self.total


class Recorder:
    """The counter of a run's device, read with the wall clock at each sample; energy() over the window after."""

    def __init__(self, gpu_handles=None, gpu=False):
        self.readings, self.error, self.counter = [], None, None
        try:
            self.counter = GPUs(gpu_handles) if gpu else Packages()
            self.readings.append((time.time(), 0.0))
        except Unreadable as e:
            self.error = str(e)

    def sample(self):
        if self.counter is None or self.error:
            return
        try:
            joules = self.counter.read()
        except Unreadable as e:
            self.error = str(e)
            return
        self.readings.append((time.time(), joules))

    def fields(self, spans, samples):
        """The row's energy fields for a window of these spans [[start, end], ...] (wall clock) and samples trained."""
        empty = dict(energy_j=None, energy_per_1k_samples_j=None, avg_power_w=None, power_limit_w=None)
        if self.counter is None or self.error:
            return {**empty, "energy_source": f"unavailable: {self.error}"[:200]}
        if not spans or not samples:
            return {**empty, "energy_source": "unavailable: the run reported no timed window"}
        times = [t for t, _ in self.readings]
        if spans[0][0] < times[0] or spans[-1][1] > times[-1]:
            return {**empty, "energy_source": "unavailable: the counter was not read around the whole window"}
        joules = sum(at(self.readings, times, b) - at(self.readings, times, a) for a, b in spans)
        seconds = sum(b - a for a, b in spans)
        if joules <= 0:  # no device draws nothing: the window fell between two updates of the counter
            return {**empty, "energy_source": "unavailable: the counter did not move over the window (shorter than "
                    "its updates: longer runs, --steps, would measure it)"}  # fmt: skip
        return dict(
            energy_j=joules,
            energy_per_1k_samples_j=1e3 * joules / samples,
            avg_power_w=joules / seconds if seconds > 0 else None,
            power_limit_w=self.counter.limit_w,
            energy_source=self.counter.source,
        )


def at(readings, times, t):
    """The counter at time t, interpolated between the readings around it."""
    i = min(max(bisect.bisect_left(times, t), 1), len(times) - 1)
    (t0, e0), (t1, e1) = readings[i - 1], readings[i]
    return e0 if t1 == t0 else e0 + (e1 - e0) * (t - t0) / (t1 - t0)

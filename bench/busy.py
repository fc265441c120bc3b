"""Was the machine busy during a run? CPU used outside the run, steal time, other work on its GPUs.

CPU: the machine's busy time over the run, less what the run's whole process tree used (the
runner's reaped children: every process of the tree, once the run is over) and less the runner's
own; the rest was used by something else. Steal: time the hypervisor gave to other guests. GPU
(NVML, sampled with memory): memory held by processes outside the tree on the run's GPUs, the
GPUs' utilisation and SM clock, and every clock throttle reason reported. A run is busy when
another process took more than BUSY_CPU of the machine, the hypervisor more than BUSY_STEAL, or
another process held memory on its GPUs: its numbers are not to be trusted silently.

In a container NVML reports the host's process IDs, which match none of the tree's: there a GPU
process is counted as another's only if it was on the GPUs before the run started (it cannot be
the run's); one that appeared during the run may be the run itself, so the GPUs' sharing is
"unknown" then, never "busy" (gpu_sharing). A sandbox may refuse the per-process query altogether:
then the sharing is "unknown" with NVML's words, and utilisation, SM clock and throttle reasons,
the readings that vouch for a GPU number, are still read (each one that fails is left empty).
"""

import resource
import statistics
import time

import psutil

from bench import nvml

BUSY_CPU = 0.10  # share of all cores used by other processes that makes a run busy
BUSY_STEAL = 0.05  # share of all cores stolen by the hypervisor that makes a run busy

# NVML's clock throttle reasons (nvmlClocksEventReason*): those that slow a GPU under load
THROTTLE = {0x4: "power cap", 0x8: "hardware slowdown", 0x20: "thermal (software)", 0x40: "thermal (hardware)",
            0x80: "power brake", 0x10: "sync boost", 0x100: "display clock"}  # fmt: skip


def cpu_clock():
    """(busy seconds of all cores, steal seconds, seconds used by this process and its reaped children)."""
    t = psutil.cpu_times()
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return t.user + t.nice + t.system + getattr(t, "irq", 0) + getattr(t, "softirq", 0), getattr(t, "steal", 0), used


class Load:
    """Start it before the run, sample() with the tree's pids while it runs, result() after it was reaped."""

    def __init__(self, handles):
        self.handles, self.cores = handles, psutil.cpu_count() or 1
        self.start_wall, self.start = time.monotonic(), cpu_clock()
        self.util, self.clock, self.throttle = [], [], set()
        self.outside = []  # per sample: {pid: MiB} of the GPU processes outside the tree
        self.matched = False  # some GPU process had a PID of the tree: NVML's PIDs are ours (no container)
        self.before = set()  # GPU processes there before the run started: never the run's
        self.process_error = None  # NVML refused the per-process query: who else was on the GPUs is unknown
        try:
            self.before = {p.pid for h in handles for p in nvml.call("nvmlDeviceGetComputeRunningProcesses", h)}
        except nvml.Unavailable as e:
            self.process_error = str(e)

    def sample(self, pids):
        """One look at the GPUs: who else is on them (while NVML answers that), how busy, how fast."""
        if not self.handles:
            return
        if not self.process_error:
            try:
                outside = {}
                for handle in self.handles:
                    for proc in nvml.call("nvmlDeviceGetComputeRunningProcesses", handle):
                        if proc.pid in pids:
                            self.matched = True
                        else:
                            outside[proc.pid] = outside.get(proc.pid, 0) + (proc.usedGpuMemory or 0) / 2**20
                self.outside.append(outside)
            except nvml.Unavailable as e:
                self.process_error = str(e)
        for handle in self.handles:  # each reading on its own: one that fails leaves the others
            rates = optional("nvmlDeviceGetUtilizationRates", handle)
            self.util.append(rates.gpu if rates is not None else None)
            self.clock.append(optional("nvmlDeviceGetClockInfo", handle, 1))  # 1 = NVML_CLOCK_SM
            reasons = optional("nvmlDeviceGetCurrentClocksEventReasons", handle)
            if reasons is None:  # the older name of the same reading
                reasons = optional("nvmlDeviceGetCurrentClocksThrottleReasons", handle) or 0
            self.throttle |= {name for bit, name in THROTTLE.items() if reasons & bit}

    def gpu_sharing(self):
        """(sharing, other processes, their peak MiB): sharing is alone, shared or unknown (see the docstring)."""
        if self.process_error:
            return f"unknown: NVML refused the per-process query ({self.process_error})"[:200], set(), None
        seen = set().union(*self.outside)
        others = seen if self.matched else seen & self.before
        peak = max((sum(mib for pid, mib in sample.items() if pid in others) for sample in self.outside), default=0)
        if others:
            return "shared", others, peak
        if seen:  # PIDs NVML gives that are not the tree's, and were not there before: perhaps the run's own
            return f"unknown: {len(seen)} GPU processes of PIDs not seen here (NVML's in a container)", others, peak
        return "alone", others, peak

    def result(self):
        """The fields of the run's row: shares of the machine, GPU readings, and whether it was busy."""
        wall = max(time.monotonic() - self.start_wall, 1e-9)
        busy, steal, used = (end - start for start, end in zip(self.start, cpu_clock()))
        other = max(0.0, busy - used) / (wall * self.cores)
        stolen = steal / (wall * self.cores)
        util = [u for u in self.util if u is not None]
        clock = [c for c in self.clock if c is not None]
        gpu = bool(self.handles)
        sharing, others, other_mib = self.gpu_sharing() if gpu else (None, set(), None)
        row = dict(other_cpu_frac=other, steal_frac=stolen, gpu_other_mib=other_mib)
        row["gpu_sharing"] = sharing
        row.update(gpu_util_pct=statistics.median(util) if util else None)
        row.update(gpu_sm_clock_mhz=statistics.median(clock) if clock else None)
        row["gpu_throttle"] = ", ".join(sorted(self.throttle)) or None
        reasons = []
        if other > BUSY_CPU:
            reasons.append(f"other processes used {other:.0%} of the CPUs")
        if stolen > BUSY_STEAL:
            reasons.append(f"the hypervisor took {stolen:.0%} of the CPUs (steal)")
        if others:
            reasons.append(f"{len(others)} other processes held {other_mib:,.0f} MiB on its GPUs")
        row.update(busy=bool(reasons), busy_reason="; ".join(reasons) or None)
        return row


def optional(function, *args):
    """An NVML reading that some devices (MIG instances, old GPUs) or versions do not give: None then."""
    try:
        return nvml.call(function, *args)
    except (nvml.Unavailable, AttributeError):
        return None

"""Sampling while a run runs: the memory of its whole process tree, the machine's load beside it, and NVML.

NVML (nvidia-ml-py), guarded: which GPUs a run sees is what CUDA_VISIBLE_DEVICES says, in its order: indices,
or GPU-/MIG- UUIDs (a unique prefix is enough, as for CUDA). Unset, every GPU. A GPU in MIG mode is read
through the handles of its MIG instances, which hold its memory and its processes. Any NVML error is raised
as Unavailable, with NVML's words: the caller records the fields it feeds as unavailable.

Load (was the machine busy during a run? CPU used outside the run, steal time, other work on its GPUs):
CPU: the machine's busy time over the run, less what the run's whole process tree used (the runner's reaped
children: every process of the tree, once the run is over) and less the runner's own; the rest was used by
something else. Steal: time the hypervisor gave to other guests. GPU (NVML, sampled with memory): memory held
by processes outside the tree on the run's GPUs, the GPUs' utilisation and SM clock, and every clock throttle
reason reported. A run is busy when another process took more than BUSY_CPU of the machine, the hypervisor
more than BUSY_STEAL, or another process held memory on its GPUs: its numbers are not to be trusted silently.
In a container NVML reports the host's process IDs, which match none of the tree's: there a GPU process is
counted as another's only if it was on the GPUs before the run started (it cannot be the run's); one that
appeared during the run may be the run itself, so the GPUs' sharing is "unknown" then, never "busy"
(gpu_sharing). A sandbox may refuse the per-process query altogether: then the sharing is "unknown" with
NVML's words, and utilisation, SM clock and throttle reasons, the readings that vouch for a GPU number, are
still read (each one that fails is left empty).

Memory (Sampler): GPU memory comes from NVML: the memory every process of the tree holds on the GPUs the run
can see, which includes the CUDA context, NCCL buffers and DALI's own allocations that torch's counters never
see. Where NVML cannot tell processes apart (a container with its own PID namespace), the rise of those
devices' used memory over the run is taken instead, and labelled. A training row's figure is the highest reading
inside its timed window (window_fields), as torch's peaks are; stop() gives the whole run's, which stays where no
reading falls inside (nvml_method says which). An NVML error leaves the GPU fields
unavailable, never 0; the two readings (per process, and the devices' rise) fail apart, so one failing leaves
the other. Host memory is the proportional set size (PSS) of the tree: shared pages are split between the
processes that share them, so forked loader workers are not counted many times over. PSS costs about 16 ms of
CPU to read for a tree that maps CUDA's libraries, where the resident size (RSS) costs nothing, so the sampler
reads PSS whenever RSS reaches a new high and otherwise as often as PSS_BUDGET of one core allows (every 0.2 to
1 s): PSS also grows while RSS stands still, as a forked worker's pages are copied on write. The peak can read
a few percent low.
"""

import os
import resource
import statistics
import threading
import time

import psutil

from bench.observe import energy
from bench.observe.nvml import Unavailable, call, text


def mig_instances(handle):
    """The MIG instances of a GPU in MIG mode, or [] (also where NVML knows no MIG)."""
    try:
        if call("nvmlDeviceGetMigMode", handle)[0] != 1:
            return []
        count = call("nvmlDeviceGetMaxMigDeviceCount", handle)
    except Unavailable:
        return []
    instances = []
    for i in range(count):
        try:
            instances.append(call("nvmlDeviceGetMigDeviceHandleByIndex", handle, i))
        except Unavailable:  # a slot with no instance
            pass
    return instances


def all_devices():
    """(uuid, handle) of every GPU and every MIG instance, GPUs in NVML's index order."""
    found = []
    for i in range(call("nvmlDeviceGetCount")):
        handle = call("nvmlDeviceGetHandleByIndex", i)
        found.append((text(call("nvmlDeviceGetUUID", handle)), handle, mig_instances(handle)))
    return found


def visible_handles(visible=None):
    """NVML handles of the devices a process sees with CUDA_VISIBLE_DEVICES=visible (os.environ's if None)."""
    call("nvmlInit")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    devices = all_devices()
    if visible is None:
        return [h for _, handle, migs in devices for h in (migs or [handle])]
    handles = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit():
            if int(entry) >= len(devices):
                break  # CUDA stops at the first entry that names no device
            _, handle, migs = devices[int(entry)]
            handles += migs or [handle]
            continue
        matches = [h for uuid, h, _ in devices if uuid.startswith(entry)]
        matches += [m for _, _, migs in devices for m in migs if text(call("nvmlDeviceGetUUID", m)).startswith(entry)]
        if len(matches) != 1:
            break
        handles += mig_instances(matches[0]) or matches
    return handles


# ----------------------------------------------------------------------------- the machine's load

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
            self.before = {p.pid for h in handles for p in call("nvmlDeviceGetComputeRunningProcesses", h)}
        except Unavailable as e:
            self.process_error = str(e)

    def sample(self, pids):
        """One look at the GPUs: who else is on them (while NVML answers that), how busy, how fast."""
        if not self.handles:
            return
        if not self.process_error:
            try:
                outside = {}
                for handle in self.handles:
                    for proc in call("nvmlDeviceGetComputeRunningProcesses", handle):
                        if proc.pid in pids:
                            self.matched = True
                        else:
                            outside[proc.pid] = outside.get(proc.pid, 0) + (proc.usedGpuMemory or 0) / 2**20
                self.outside.append(outside)
            except Unavailable as e:
                self.process_error = str(e)
        at = time.time()  # the wall clock, as a run's timed_spans are: window() keeps the readings inside them
        for handle in self.handles:  # each reading on its own: one that fails leaves the others
            rates = optional("nvmlDeviceGetUtilizationRates", handle)
            self.util.append((at, rates.gpu if rates is not None else None))
            self.clock.append((at, optional("nvmlDeviceGetClockInfo", handle, 1)))  # 1 = NVML_CLOCK_SM
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
        gpu = bool(self.handles)
        sharing, others, other_mib = self.gpu_sharing() if gpu else (None, set(), None)
        row = dict(other_cpu_frac=other, steal_frac=stolen, gpu_other_mib=other_mib)
        row["gpu_sharing"] = sharing
        row.update(self.window(None))
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

    def window(self, spans):
        """The GPUs' utilisation and SM clock, medians of the readings inside spans (a run's timed window), or of the
        whole run where spans is None. A training run spends most of its wall time outside its window (its start,
        cuDNN's autotuning, evaluation) with the GPU idle: the whole run's median read 0% on GPUs busy in the window."""
        inside = (lambda at: True) if spans is None else (lambda at: any(a <= at <= b for a, b in spans))
        util = [u for at, u in self.util if u is not None and inside(at)]
        clock = [c for at, c in self.clock if c is not None and inside(at)]
        return dict(gpu_util_pct=statistics.median(util) if util else None,
                    gpu_sm_clock_mhz=statistics.median(clock) if clock else None)  # fmt: skip


def optional(function, *args):
    """An NVML reading that some devices (MIG instances, old GPUs) or versions do not give: None then."""
    try:
        return call(function, *args)
    except (Unavailable, AttributeError):
        return None


# ----------------------------------------------------------------------------- the memory of the tree

PSS_BUDGET = 0.05  # share of one core the sampler may spend reading PSS


class Sampler(threading.Thread):
    """Polls the tree under `pid` every `interval` seconds until stop(); keeps the peaks.
    gpu: the run uses CUDA, so NVML not answering makes its GPU fields unavailable (else there is no GPU).
    gpus: how many of the visible GPUs the run uses, the first ones (one process: cuda:0); None: every one. Its
    memory, load and energy are read on those alone: an idle GPU beside it adds its 60-100 W to nothing."""

    def __init__(self, pid, interval=0.2, gpu=False, gpus=None):
        super().__init__(daemon=True)
        self.root, self.interval = psutil.Process(pid), interval
        self.devices, self.nvml_error, self.tree_error, self.rise_error = [], None, None, None
        try:
            self.devices = visible_handles()[:gpus]
            self.device_used_at_start = self.device_used()
        except Unavailable as e:
            self.devices, self.nvml_error = [], str(e) if gpu else None
        self.load = Load(self.devices)
        self.energy = energy.Recorder(self.devices, gpu)  # the counter, read at each sample: energy_fields()
        self.peak_rss, self.peak_host, self.peak_tree_gpu, self.peak_device_rise = 0, 0, 0, 0
        self.last_full_read, self.full_interval = 0.0, interval
        self.samples, self.cpu_s = 0, 0.0
        self.readings, self.kind, self.method = [], None, None  # (wall clock, the tree's GPU memory, the device's
        # rise) at every sample; the one of the two that stop() read (its index in a reading), and its words
        self.done = threading.Event()

    def device_used(self):
        return sum(call("nvmlDeviceGetMemoryInfo", h).used for h in self.devices)

    def tree(self):
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def host_memory(self, processes, full):
        total = 0
        for p in processes:
            try:
                info = p.memory_full_info() if full else p.memory_info()
                total += getattr(info, "pss", info.rss)  # PSS on Linux, RSS elsewhere
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return total

    def sample(self):
        processes = self.tree()
        rss, now = self.host_memory(processes, full=False), time.monotonic()
        if rss > self.peak_rss * 1.02 or now - self.last_full_read >= self.full_interval:
            self.peak_rss = max(self.peak_rss, rss)
            started = time.thread_time()
            self.peak_host = max(self.peak_host, self.host_memory(processes, full=True))
            cost = time.thread_time() - started
            self.last_full_read, self.full_interval = now, min(1.0, max(self.interval, cost / PSS_BUDGET))
        pids, tree_gpu, rise, at = {p.pid for p in processes}, None, None, time.time()
        if self.devices and not self.nvml_error and not self.tree_error:  # two readings, each failing on its own
            try:
                tree_gpu = 0
                for handle in self.devices:
                    for proc in call("nvmlDeviceGetComputeRunningProcesses", handle):
                        if proc.pid in pids and proc.usedGpuMemory:
                            tree_gpu += proc.usedGpuMemory
                self.peak_tree_gpu = max(self.peak_tree_gpu, tree_gpu)
            except Unavailable as e:
                self.tree_error, tree_gpu = str(e), None
        if self.devices and not self.nvml_error and not self.rise_error:
            try:
                rise = self.device_used() - self.device_used_at_start
                self.peak_device_rise = max(self.peak_device_rise, rise)
            except Unavailable as e:
                self.rise_error = str(e)
        if self.devices:
            self.readings.append((at, tree_gpu, rise))
        self.load.sample(pids)
        self.energy.sample()
        self.samples += 1

    def run(self):
        start = time.thread_time()
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.interval)
        self.cpu_s = time.thread_time() - start

    def stop(self):
        """Stop sampling (call it once the run has been reaped); return the row's memory and load fields."""
        self.done.set()
        if self.ident is not None:  # started (a test may sample by hand)
            self.join()
        self.energy.sample()  # the counter after the run: the window's end lies between two readings
        gpu, method = None, None
        if self.nvml_error or (self.tree_error and self.rise_error):
            method = f"unavailable: {self.nvml_error or self.tree_error + '; ' + self.rise_error}"[:200]
        elif self.devices:
            if self.peak_tree_gpu and not self.tree_error:
                gpu, method, self.kind = self.peak_tree_gpu, "process tree", 1
            elif not self.rise_error:
                gpu, method, self.kind = self.peak_device_rise, "device rise", 2
                method += f" (the process query failed: {self.tree_error})"[:150] if self.tree_error else ""
            else:  # the process query worked but saw none of the tree, and the rise could not be read
                method = f"unavailable: {self.rise_error}"[:200]
        self.method = method
        row = dict(
            peak_host_mem_mib=self.peak_host / 2**20 if self.peak_host else None,
            nvml_peak_mib=gpu / 2**20 if gpu is not None else None,
            nvml_method=method,
            memory_samples=self.samples,
            sampler_cpu_s=self.cpu_s,
        )
        return {**row, **self.load.result()}

    def window_fields(self, metrics):
        """The GPU memory, utilisation, SM clock and energy of the run's timed window (its metrics' timed_spans): the
        warm-up (cuDNN's autotuning) and the evaluations left out, as torch's peaks are (meter.py); the whole run's
        utilisation and clock stay where no reading fell inside the window."""
        spans = metrics.get("timed_spans")
        readings = self.load.window(spans) if spans and self.devices else {}
        return {**self.window_memory(spans), **{k: v for k, v in readings.items() if v is not None},
                **self.energy_fields(metrics)}  # fmt: skip

    def window_memory(self, spans):
        """NVML's peak over the readings inside the spans, from the source stop() chose; the whole run's (said so)
        where no reading falls inside them."""
        if self.kind is None or not spans:
            return {}
        within = [r[self.kind] for r in self.readings if any(a <= r[0] <= b for a, b in spans)]
        inside = [v for v in within if v is not None]
        if not inside:
            return dict(nvml_method=f"{self.method}; the whole run: no reading inside the timed window"[:200])
        return dict(nvml_peak_mib=max(inside) / 2**20, nvml_method=f"{self.method}; the timed window"[:200])

    def energy_fields(self, metrics):
        """The energy of the run's timed window (its metrics' timed_spans) and per 1,000 samples it trained."""
        samples = (metrics.get("steps_timed") or 0) * (metrics.get("global_batch_size") or 0)
        return self.energy.fields(metrics.get("timed_spans"), samples)

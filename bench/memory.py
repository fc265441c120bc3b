"""Sample the memory of a run's whole process tree while it runs, and the machine's load beside it.

GPU memory comes from NVML (nvidia-ml-py): the memory every process of the tree holds on the GPUs
the run can see (bench/nvml.py), which includes the CUDA context, NCCL buffers and DALI's own
allocations that torch's counters never see. Where NVML cannot tell processes apart (a container
with its own PID namespace), the rise of those devices' used memory over the run is taken instead,
and labelled. NVML's peak covers the whole run, start-up and evaluation included, where torch's
peaks start after the warm-up. An NVML error leaves the GPU fields unavailable, never 0; the two
readings (per process, and the devices' rise) fail apart, so one failing leaves the other.
Host memory is the proportional set size (PSS) of the tree: shared pages are split between the
processes that share them, so forked loader workers are not counted many times over. PSS costs
about 16 ms of CPU to read for a tree that maps CUDA's libraries, where the resident size (RSS)
costs nothing, so the sampler reads PSS whenever RSS reaches a new high and otherwise as often as
PSS_BUDGET of one core allows (every 0.2 to 1 s): PSS also grows while RSS stands still, as a
forked worker's pages are copied on write. The peak can read a few percent low.
"""

import threading
import time

import psutil

from bench import nvml
from bench.busy import Load

PSS_BUDGET = 0.05  # share of one core the sampler may spend reading PSS


class Sampler(threading.Thread):
    """Polls the tree under `pid` every `interval` seconds until stop(); keeps the peaks.
    gpu: the run uses CUDA, so NVML not answering makes its GPU fields unavailable (else there is no GPU)."""

    def __init__(self, pid, interval=0.2, gpu=False):
        super().__init__(daemon=True)
        self.root, self.interval = psutil.Process(pid), interval
        self.devices, self.nvml_error, self.tree_error, self.rise_error = [], None, None, None
        try:
            self.devices = nvml.visible_handles()
            self.device_used_at_start = self.device_used()
        except nvml.Unavailable as e:
            self.devices, self.nvml_error = [], str(e) if gpu else None
        self.load = Load(self.devices)
        self.peak_rss, self.peak_host, self.peak_tree_gpu, self.peak_device_rise = 0, 0, 0, 0
        self.last_full_read, self.full_interval = 0.0, interval
        self.samples, self.cpu_s = 0, 0.0
        self.done = threading.Event()

    def device_used(self):
        return sum(nvml.call("nvmlDeviceGetMemoryInfo", h).used for h in self.devices)

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
        pids = {p.pid for p in processes}
        if self.devices and not self.nvml_error and not self.tree_error:  # two readings, each failing on its own
            try:
                tree_gpu = 0
                for handle in self.devices:
                    for proc in nvml.call("nvmlDeviceGetComputeRunningProcesses", handle):
                        if proc.pid in pids and proc.usedGpuMemory:
                            tree_gpu += proc.usedGpuMemory
                self.peak_tree_gpu = max(self.peak_tree_gpu, tree_gpu)
            except nvml.Unavailable as e:
                self.tree_error = str(e)
        if self.devices and not self.nvml_error and not self.rise_error:
            try:
                self.peak_device_rise = max(self.peak_device_rise, self.device_used() - self.device_used_at_start)
            except nvml.Unavailable as e:
                self.rise_error = str(e)
        self.load.sample(pids)
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
        gpu, method = None, None
        if self.nvml_error or (self.tree_error and self.rise_error):
            method = f"unavailable: {self.nvml_error or self.tree_error + '; ' + self.rise_error}"[:200]
        elif self.devices:
            if self.peak_tree_gpu and not self.tree_error:
                gpu, method = self.peak_tree_gpu, "process tree"
            elif not self.rise_error:
                gpu, method = self.peak_device_rise, "device rise"
                method += f" (the process query failed: {self.tree_error})"[:150] if self.tree_error else ""
            else:  # the process query worked but saw none of the tree, and the rise could not be read
                method = f"unavailable: {self.rise_error}"[:200]
        row = dict(
            peak_host_mem_mib=self.peak_host / 2**20 if self.peak_host else None,
            nvml_peak_mib=gpu / 2**20 if gpu is not None else None,
            nvml_method=method,
            memory_samples=self.samples,
            sampler_cpu_s=self.cpu_s,
        )
        return {**row, **self.load.result()}

"""Sample the memory of a run's whole process tree while it runs.

GPU memory comes from NVML (nvidia-ml-py): the memory every process of the tree holds on every
GPU, which includes the CUDA context, NCCL buffers and DALI's own allocations that torch's
counters never see. Where NVML cannot tell processes apart (a container with its own PID
namespace), the rise of the devices' used memory over the run is taken instead, and labelled.
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

try:
    import pynvml
except ImportError:  # a CPU-only environment without nvidia-ml-py
    pynvml = None

PSS_BUDGET = 0.05  # share of one core the sampler may spend reading PSS


def nvml_devices():
    """NVML handles of all GPUs, or [] where there is no NVIDIA driver."""
    if pynvml is None:
        return []
    try:
        pynvml.nvmlInit()
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except pynvml.NVMLError:
        return []


class Sampler(threading.Thread):
    """Polls the tree under `pid` every `interval` seconds until stop(); keeps the peaks."""

    def __init__(self, pid, interval=0.2):
        super().__init__(daemon=True)
        self.root, self.interval = psutil.Process(pid), interval
        self.devices = nvml_devices()
        self.device_used_at_start = self.device_used()
        self.peak_rss, self.peak_host, self.peak_tree_gpu, self.peak_device_rise = 0, 0, 0, 0
        self.last_full_read, self.full_interval = 0.0, interval
        self.samples, self.cpu_s = 0, 0.0
        self.done = threading.Event()

    def device_used(self):
        return sum(pynvml.nvmlDeviceGetMemoryInfo(h).used for h in self.devices)

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
        if self.devices:
            pids = {p.pid for p in processes}
            tree_gpu = 0
            for handle in self.devices:
                for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if proc.pid in pids and proc.usedGpuMemory:
                        tree_gpu += proc.usedGpuMemory
            self.peak_tree_gpu = max(self.peak_tree_gpu, tree_gpu)
            self.peak_device_rise = max(self.peak_device_rise, self.device_used() - self.device_used_at_start)
        self.samples += 1

    def run(self):
        start = time.thread_time()
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.interval)
        self.cpu_s = time.thread_time() - start

    def stop(self):
        """Stop sampling; return the peaks in MiB (GPU fields None without NVML)."""
        self.done.set()
        self.join()
        gpu, method = None, None
        if self.devices:
            if self.peak_tree_gpu:
                gpu, method = self.peak_tree_gpu, "process tree"
            else:
                gpu, method = self.peak_device_rise, "device rise"
        return dict(
            peak_host_mem_mb=self.peak_host / 2**20 if self.peak_host else None,
            nvml_peak_mb=gpu / 2**20 if gpu is not None else None,
            nvml_method=method,
            memory_samples=self.samples,
            sampler_cpu_s=self.cpu_s,
        )

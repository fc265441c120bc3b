"""NVML (nvidia-ml-py) for the sampler, guarded: the GPUs a run can see, and calls that never crash the bench.

Which GPUs a run sees is what CUDA_VISIBLE_DEVICES says, in its order: indices, or GPU-/MIG- UUIDs
(a unique prefix is enough, as for CUDA). Unset, every GPU. A GPU in MIG mode is read through the
handles of its MIG instances, which hold its memory and its processes. Any NVML error is raised
as Unavailable, with NVML's words: the caller records the fields it feeds as unavailable.
"""

import os

try:
    import pynvml
except ImportError:  # a CPU-only environment without nvidia-ml-py
    pynvml = None


class Unavailable(Exception):
    """NVML cannot be asked: not installed, no driver, or an NVML call failed."""


def call(function, *args):
    """pynvml.function(*args), with any NVML error raised as Unavailable."""
    if pynvml is None:
        raise Unavailable("nvidia-ml-py is not installed")
    try:
        return getattr(pynvml, function)(*args)
    except pynvml.NVMLError as e:
        raise Unavailable(f"{function}: {e}") from None


def text(value):
    return value.decode() if isinstance(value, bytes) else value


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

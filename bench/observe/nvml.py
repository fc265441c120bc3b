"""NVML (nvidia-ml-py), guarded: every call through call(), any NVML error (or no NVML at all) raised as Unavailable
with NVML's words, so that the sampler and the energy counters (bench/observe/sample.py, bench/observe/energy.py)
leave a field unavailable rather than fail the run."""

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

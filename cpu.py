"""The CPU's features, read in one place: by the scripts (checks.py) and by the bench (bench/observe/machine.py), which
imports no torch (the runner's pages would be shared with every run it measures, and charged to none). One rule for
native bf16, whoever asks.

    flags()            the CPU's feature flags as /proc/cpuinfo lists them (x86 `flags`, Arm `Features`)
    native_bf16(found)  whether those flags compute bf16 natively: AVX-512-BF16 or AMX (x86), bf16 (Arm)

CPUINFO_FLAGS, where set, stands for /proc/cpuinfo's flags: the one seam through which the tests, and `make test
CPU=avx2` (or bf16), run as a machine of another class would. Set and empty, it names no CPU: refused in one line
(a FlagsError), not taken for a CPU without bf16. CPUINFO_FLAGS_READ, where set, names a file each read of this
machine's flags marks: how make test finds the tests whose code read the class.
"""

import os

# /proc/cpuinfo's names of the features that compute bf16 natively; without one, bf16 autocast on the CPU is emulated
NATIVE_BF16 = ("avx512_bf16", "amx_bf16", "bf16")


class FlagsError(ValueError):
    """CPUINFO_FLAGS set to nothing: its one-line message says so."""


def flags(cpuinfo="/proc/cpuinfo"):
    """The flags as a set; None where the system does not say (no such file, no flags line)."""
    if cpuinfo == "/proc/cpuinfo":
        if os.environ.get("CPUINFO_FLAGS_READ"):
            open(os.environ["CPUINFO_FLAGS_READ"], "a").close()
        forced = os.environ.get("CPUINFO_FLAGS")
        if forced is not None:
            if not forced.split():
                raise FlagsError(
                    "CPUINFO_FLAGS is set but empty: name the CPU's flags as /proc/cpuinfo does (e.g. 'avx2 fma'),"
                    " or unset it to read this machine's"
                )
            return set(forced.split())
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except (OSError, IndexError):
        pass
    return None


def native_bf16(found):
    """True where the flags hold a feature that computes bf16 natively, False where they hold none, None where there
    are no flags to read."""
    if found is None:
        return None
    return bool(set(NATIVE_BF16) & set(found))

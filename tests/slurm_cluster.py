"""A one-node Slurm for the tests: Debian's slurm-wlm and munge (installed by `make test`, as root), a generated
slurm.conf in a temporary folder, and munged, slurmctld and slurmd started for the test and stopped after it.

No cgroups (proctrack/linuxproc, task/none), no accounting: it runs in a container. Every daemon keeps its socket,
state, spool and log in the folder, and the client commands (sbatch, srun, scontrol) find the cluster through
SLURM_CONF, so nothing of the machine's own is touched.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")


class Unavailable(Exception):
    """The one line that says why the cluster could not come up."""


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def write_conf(folder, node, cpus, memory_mib):
    munge_socket = folder / "munge.socket"
    conf = f"""\
ClusterName=test
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
SlurmdTimeout=60
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mib} State=UNKNOWN
PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""
    (folder / "state").mkdir()
    (folder / "spool").mkdir()
    (folder / "slurm.conf").write_text(conf)
    return munge_socket


def on_the_whole_machine():
    """Run a daemon on every core the tests were given (TESTS_MACHINE_CORES, kept by tests/conftest.py), though the test
    that starts it keeps to its worker's share (tests/suite.py): the cluster is a machine of its own."""
    cores = os.environ.get("TESTS_MACHINE_CORES")
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(core) for core in cores.split(",")})


def node_cpus_memory(env):
    """What slurmd finds on this machine (slurmd -C), so that the node is not drained for a mismatch."""
    found = subprocess.run(
        ["slurmd", "-C"], capture_output=True, text=True, env=env, timeout=60, preexec_fn=on_the_whole_machine
    ).stdout
    fields = dict(part.split("=", 1) for part in found.split() if "=" in part)
    return int(fields.get("CPUs", os.cpu_count() or 1)), max(1, int(fields.get("RealMemory", 1024)) - 256)


def wait_for(check, seconds, what, log):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else ["no log"]
    raise Unavailable(f"{what} did not come up in {seconds} s: {tail[0] if tail else 'empty log'}")


@contextlib.contextmanager
def one_node(folder):
    """Start the cluster in folder; yield the environment its client commands need; stop every daemon after."""
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if missing:
        raise Unavailable(f"{', '.join(missing)} not installed: Debian's slurm-wlm and munge (make test installs them)")
    if os.geteuid() != 0:
        raise Unavailable("a one-node Slurm runs its daemons as root, and this test is not root")
    folder = Path(folder)
    node = socket.gethostname().split(".")[0]
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf"), "PATH": f"/usr/sbin:{os.environ['PATH']}"}
    for name in [n for n in env if n.startswith("SLURM_") and n != "SLURM_CONF"]:  # not a job's own
        del env[name]
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    cpus, memory = node_cpus_memory(env)
    munge_socket = write_conf(folder, node, cpus, memory)
    daemons = []
    try:
        munged = ["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={munge_socket}"]
        munged += [f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log", f"--seed-file={folder}/seed"]
        daemons.append(subprocess.Popen(munged, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        wait_for(munge_socket.exists, 20, "munged", folder / "munged.log")
        for daemon in "slurmctld", "slurmd":
            log = open(folder / f"{daemon}.out", "w")
            daemons.append(
                subprocess.Popen(
                    [daemon, "-D", "-f", env["SLURM_CONF"]],
                    env=env,
                    stdout=log,
                    stderr=log,
                    preexec_fn=on_the_whole_machine,
                )
            )

        def idle():
            for d in daemons:
                if d.poll() is not None:
                    name = d.args[0]
                    out = folder / f"{name}.out"
                    lines = out.read_text(errors="replace").strip().splitlines() if out.exists() else []
                    raise Unavailable(f"{name} exited ({d.returncode}): {lines[-1] if lines else 'no output'}")
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env)
            return state.stdout.strip() in ("idle", "mix", "alloc")

        wait_for(idle, 60, "the node (sinfo)", folder / "slurmd.log")
        yield env
    finally:
        for d in reversed(daemons):
            d.terminate()
        for d in reversed(daemons):
            try:
                d.wait(timeout=20)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()

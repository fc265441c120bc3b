"""python -m bench --launcher slurm [--nodes N]: the bench inside a Slurm allocation (sbatch slurm/bench.sbatch).

The bench runs on the allocation's first node, and so do its single-process rows, as they would anywhere. Each
distributed row (ddp, all) runs through `srun`, one task per node, each task a `torchrun` agent; the agents meet
by c10d rendezvous on the first node and start one process per GPU (on a CPU, per --nproc). Nothing home-made:
Slurm starts the processes, torchrun and c10d join them. A row's processes are nodes x processes per node.

The plan keeps each row's command as it would run on one machine, with the nodes it is to run on: launch() turns
it into srun + torchrun with the allocation it finds then, so --resume works in a new allocation of the same size.
Its processes run under Slurm, not under the bench, so the bench measures their speed but not their memory.
Every node must see the repository, the data and --out at the same paths (a shared file system), as any
multi-node job needs.
"""

import os
import shutil
import socket
import subprocess
from dataclasses import replace

from bench import BenchError

PORT = 29500  # the rendezvous port on the first node (RDZV_PORT to change it)


def add_flags(p):
    p.add_argument(
        "--launcher",
        choices=["local", "slurm"],
        default="local",
        help="slurm: inside an allocation (sbatch slurm/bench.sbatch), the DDP rows run on its nodes through srun",
    )
    p.add_argument("--nodes", type=int, help="with --launcher slurm: the nodes the DDP rows run on (all of the job's)")


def check_flags(config):
    """--nodes with the Slurm launcher alone, which reads them from its allocation (nodes_of); the modes that launch
    distributed rows with them say so in their registrations (only: a bench and --scaling)."""
    launch = config.launch
    if launch.nodes is not None and launch.launcher != "slurm":
        raise BenchError("--nodes goes with --launcher slurm")
    if launch.nodes is not None and launch.nodes < 1:
        raise BenchError(f"--nodes {launch.nodes}: 1 or more")


def nodes_of(launch):
    """The nodes the distributed rows run on: with the Slurm launcher, the allocation's (the first --nodes of them,
    where given); else none."""
    return len(allocation(launch.nodes)["hosts"]) if launch.launcher == "slurm" else launch.nodes


def allocation(nodes=None):
    """The allocation the bench runs in: its job id, node names (the first first; the first `nodes` of them when
    asked) and CPUs per node. A BenchError when this is not the first node of a Slurm allocation."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        raise BenchError("--launcher slurm runs inside a Slurm allocation: submit it with sbatch slurm/bench.sbatch")
    if os.environ.get("SLURM_STEP_ID") not in (None, "batch"):
        raise BenchError("--launcher slurm runs in the job's batch script (sbatch slurm/bench.sbatch), not inside"
                         " srun: the rows' own job steps would wait for the CPUs this step holds")  # fmt: skip
    for tool in "srun", "scontrol":
        if shutil.which(tool) is None:
            raise BenchError(f"--launcher slurm: {tool} is not on PATH in this allocation")
    listed = subprocess.run(["scontrol", "show", "hostnames", os.environ.get("SLURM_JOB_NODELIST", "")],
                            capture_output=True, text=True)  # fmt: skip
    hosts = listed.stdout.split()
    if listed.returncode or not hosts:
        raise BenchError(f"--launcher slurm: scontrol cannot list job {job}'s nodes: {listed.stderr.strip()[:200]}")
    here = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if here != hosts[0]:
        raise BenchError(f"--launcher slurm runs on the allocation's first node, {hosts[0]}, and this is {here}:"
                         " submit it with sbatch (slurm/bench.sbatch), whose script runs there")  # fmt: skip
    if nodes is not None and nodes > len(hosts):
        raise BenchError(f"--nodes {nodes}: job {job} has {len(hosts)} node(s)")
    return dict(job=job, hosts=hosts[: nodes or len(hosts)], cpus=os.environ.get("SLURM_CPUS_ON_NODE"))


def spread(processes, per_node, nodes):
    """(nodes, processes per node) for a row of `processes` processes: one node while they fit on one (per_node:
    GPUs per node, or a CPU's cores), else whole nodes; a BenchError when they cannot be placed so."""
    if processes <= per_node:
        return 1, processes
    if processes % per_node:
        raise BenchError(f"--scaling {processes}: across nodes a count fills whole nodes of {per_node} processes")
    if processes // per_node > nodes:
        raise BenchError(f"--scaling {processes}: {processes // per_node} nodes of {per_node} processes, and the"
                         f" allocation has {nodes}")  # fmt: skip
    return processes // per_node, per_node


def on_nodes(run, nodes):
    """run (a torchrun row, its --nproc-per-node processes on one machine) planned for `nodes` nodes."""
    return replace(run, nodes=nodes, processes=nodes * run.processes)


def launched(run):
    """The command a planned row runs: its own, or for a row on nodes srun + torchrun in this allocation."""
    return command(run, allocation(run.nodes)) if run.nodes else run.cmd


def command(run, found):
    """The command that runs a row planned for nodes (planned.Run.nodes) in the allocation `found`: srun starts a
    torchrun agent on each node, which joins the others at the first node's c10d store."""
    cmd, at = run.cmd, run.cmd.index("--nproc-per-node")  # python -m torch.distributed.run ... --nproc-per-node P
    python, per_node, script = cmd[: cmd.index("torch.distributed.run") - 1], cmd[at + 1], cmd[at + 2 :]
    hosts = found["hosts"][: run.nodes]
    srun = ["srun", "--nodes", str(run.nodes), "--ntasks", str(run.nodes), "--ntasks-per-node", "1"]
    srun += ["--nodelist", ",".join(hosts), "--kill-on-bad-exit=1"]
    srun += ["--cpus-per-task", found["cpus"]] if found["cpus"] else []
    port = os.environ.get("RDZV_PORT", str(PORT))
    agent = [*python, "-m", "torch.distributed.run", "--nnodes", str(run.nodes), "--nproc-per-node", per_node]
    agent += [
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"{hosts[0]}:{port}",
        "--rdzv-id",
        f"{found['job']}-{run.name}",
    ]
    return srun + agent + script

"""Two processes of a distributed script, forked from one interpreter: what `torchrun --standalone --nproc-per-node 2`
starts, without two more interpreters importing torch (seconds each on 2 cores), for the fast tests.

    python tests/pair.py SCRIPT [flags]

Each process gets the environment torchrun gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
and runs SCRIPT as __main__; the exit code is rank 0's, or rank 1's where rank 0's is 0. Run through helpers.run, the
interpreter it forks from is a child of tests/forkserver.py, which has imported torch and run no operation.
"""

import os
import runpy
import socket
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(script):
    """SCRIPT as __main__: its exit code."""
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


script, flags = sys.argv[1], sys.argv[2:]
os.environ.update(WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
sys.argv = [script, *flags]
sys.path[0] = os.path.dirname(os.path.abspath(script))
sys.stdout.flush()
sys.stderr.flush()
pid = os.fork()
rank = 1 if pid == 0 else 0
os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0")
code = run(script)
if pid == 0:  # rank 1 ends here, its output flushed, without the interpreter's teardown
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
_, status = os.waitpid(pid, 0)
sys.exit(code or os.waitstatus_to_exitcode(status))

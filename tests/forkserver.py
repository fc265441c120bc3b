"""A process that has imported torch once and forks a fresh child for each script a test runs.

`import torch` takes seconds on the 2-core CI machines and most script runs in the tests (the bad-input sweeps)
end within a second of it. helpers.run sends `python SCRIPT.py ARGS`, `python -m bench ARGS` (the bench and
its imports, pandas, matplotlib and scipy, are imported here once too) and `python -m torch.distributed.run ARGS`
(torchrun's agent) here instead of starting an interpreter, when the test asks for nothing the interpreter would
read at its start (no environment of its own, no limits). The child is a process of its own, as a user's would be:
it runs the script as __main__ with its own argv, working folder, stdout and stderr (files), and exits with the
script's exit code, a traceback printed as Python prints one. The server itself never runs a torch operation, so
no thread pool is forked half-made.

The processes those children start are forked the same way (fork_run), where a new interpreter would run them
alike: nothing it reads at its start differs (but its threads, given it here with torch.set_num_threads, inductor's
cache, read where it compiles, and what torchrun gives its workers for their group), the starter's handlers and
exit functions are not the run's, the scripts' modules are imported anew:
- a bench's runs (launch.start: start_forked), `python SCRIPT.py` or torchrun, where no limit of memory is asked
  (a forked run's address space holds the bench's libraries too: RLIMIT_AS would stop it at another batch than a
  user's run) and the bench runs no thread of its own (its sampler's): each ends with the bench, as launch's do;
- torchrun's workers (SubprocessHandler._popen: popen_forked), each in a session of its own as torchrun starts
  them, its output where torchrun sends it; the agent has threads of its own (its store's), as it has where it
  forks its workers itself (`--start-method fork`, for a function), and a worker starts its group anew.
A bench run here in a copy of the suite (a test's, with a made-up technique) imports that copy's bench/ and scripts
(suite_at), torch, pandas and the rest as they are here. A bench or a torchrun the tests start as an interpreter of
their own (the stopped and killed benches, the killed ranks, `make compare`, a Slurm job) and everything under
TESTS_NO_FORKSERVER=1 start their processes as a user's do: new interpreters. Each forked process is listed in
TESTS_FORKED (its command line is the server's): helpers.assert_no_orphans reads it.

Protocol, one JSON line each way: {"argv": [...], "cwd": ..., "env": {...}, "out": PATH, "err": PATH, "cores": [...]}
(the cores the test may use: the child keeps to them) -> {"pid": N}, then {"status": CODE} when the child has ended
(the caller may kill pid first, on its own timeout).
"""

import atexit
import json
import os
import re
import runpy
import signal
import subprocess
import sys
import threading
import time
import traceback

import numpy  # noqa: F401
import PIL.Image  # noqa: F401
import psutil
import torch
import torchvision  # noqa: F401
import tqdm  # noqa: F401
from torch.distributed.elastic.multiprocessing.subprocess_handler import subprocess_handler

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository: bench/
import bench.cli  # noqa: E402, F401  (python -m bench: pandas, matplotlib, scipy, jinja2 and the bench itself)
import bench.modes  # noqa: E402
from bench.stages.running import launch  # noqa: E402

bench.modes.registered()  # every mode's module, as python -m bench imports them when it reads its flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# what an interpreter reads as it starts (a run forked here would not); CUDA_VISIBLE_DEVICES is read where CUDA
# starts, in the child: neither the server nor a bench starts it
READ_AT_START = re.compile(r"^(PYTHON|OMP_|MKL_|KMP_|LD_|TORCH|CUDA(?!_VISIBLE_DEVICES$)|NVIDIA|PYTORCH)")


def at_start(env):
    return {k: v for k, v in env.items() if READ_AT_START.match(k)}


# what torchrun gives its workers that they read where they start their group, not as the interpreter starts
WORKER_ENV = re.compile(r"^(TORCHELASTIC_|TORCH_NCCL_)")


def started_alike(env, read_later=None):
    """Would a new interpreter with env start as this process did? Differences a run forked here is given itself:
    inductor's cache (read where it compiles), the threads (set_threads), what read_later matches."""
    differs = {k for k in at_start(env).keys() | at_start(os.environ).keys() if env.get(k) != os.environ.get(k)}
    differs -= {k for k in differs if read_later and read_later.match(k)}
    return differs <= {"TORCHINDUCTOR_CACHE_DIR"} | ({"OMP_NUM_THREADS"} if threads(env) else set())


def threads(env):
    return int(env["OMP_NUM_THREADS"]) if env.get("OMP_NUM_THREADS", "").isdigit() else None


def set_threads(env):
    """torch's threads as a new interpreter's, whose OpenMP read OMP_NUM_THREADS as it loaded."""
    if threads(env) and threads(env) != threads(os.environ):
        torch.set_num_threads(threads(env))


def as_main(argv):
    """Run `python ARGV` in this process, as __main__ with its own argv; the exit code Python would give."""
    module = argv[1] if argv[0] == "-m" else None  # python -m MODULE ARGS: the module found from the working folder
    sys.argv = [module, *argv[2:]] if module else list(argv)
    sys.path[0] = os.getcwd() if module else os.path.dirname(os.path.abspath(argv[0]))
    if module == "torch.distributed.run":
        subprocess_handler.SubprocessHandler._popen = popen_forked
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def own_output(out_fd, err_fd, stdin=True, unbuffered=False):
    """stdout and stderr to these descriptors, stdin from /dev/null (unless stdin is False: kept), sys's files on
    them; unbuffered: as `python -u` writes."""
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    if stdin:
        os.close(0)
        os.open(os.devnull, os.O_RDONLY)
    # closefd=False, as the interpreter's own: replaced (in a run forked from a bench here), they close nothing
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    if unbuffered:
        sys.stdout.reconfigure(write_through=True)
        sys.stderr.reconfigure(write_through=True)


def list_forked(pid, argv, env):
    """Say a process just forked and its argv in the tests' list (TESTS_FORKED): its command line is the server's, so
    helpers.assert_no_orphans finds it there. Said by the parent, before the fork returns: a process left running
    is listed however soon it is looked for."""
    if env.get("TESTS_FORKED"):
        try:
            created = psutil.Process(pid).create_time()
        except psutil.NoSuchProcess:  # gone already (reaped by a parent that ignores SIGCHLD): left running by no one
            return
        with open(env["TESTS_FORKED"], "a") as listed:
            listed.write(json.dumps([pid, created, list(argv)]) + "\n")


def end(code):
    """Exit as the interpreter would: its atexit functions run, its output flushed."""
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class Forked:
    """What a starter reads of its Popen, for a process forked here: pid, returncode, poll(), wait(timeout)."""

    def __init__(self, pid, argv):
        self.pid, self.args, self.returncode = pid, argv, None

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is None:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            elif time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            else:
                time.sleep(0.01)
        return self.returncode


def fork_run(argv, env, out_fd, err_fd, cwd=None, first=(), stdin=True):
    """`python ARGV` forked from this process, run as a new interpreter would run it (see above): first, what the
    starter's Popen does in its child; the starter's handlers and exit functions dropped, the scripts' modules
    imported anew. A Forked."""
    unbuffered = argv[:1] == ["-u"]
    argv = argv[1:] if unbuffered else list(argv)
    sys.stdout.flush()  # nothing of this process's own output left to be written twice
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        list_forked(pid, argv, env)
        return Forked(pid, argv)
    code = 1
    try:
        for step in first:
            step()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        atexit._clear()
        if cwd:
            os.chdir(cwd)
        for name, module in list(sys.modules.items()):  # the scripts' modules (loader, checks) imported anew
            if os.path.dirname(getattr(module, "__file__", None) or "") in (ROOT, os.getcwd()):
                del sys.modules[name]
        set_threads(env)
        os.environ.clear()
        os.environ.update(env)
        own_output(out_fd, err_fd, stdin=stdin, unbuffered=unbuffered)
        code = as_main(argv)
    except BaseException:
        traceback.print_exc()
    end(code)


def forking(its_launch, home):
    """launch.start for a bench run here from the suite at home (its launch module): each run forked from the bench
    (see above), else started as its own start does."""
    fresh = its_launch.start

    def start(cmd, log, env, memory_limit_mib=None):
        python = cmd[0] == sys.executable and (cmd[1].endswith(".py") or cmd[1:3] == ["-m", "torch.distributed.run"])
        if not python or memory_limit_mib or threading.active_count() > 1 or not started_alike(env):
            return fresh(cmd, log, env, memory_limit_mib)
        return fork_run(cmd[1:], env, log.fileno(), log.fileno(), cwd=home, first=[its_launch.start_child])

    return start


start_forked = forking(launch, ROOT)


def suite_at(cwd):
    """The launch module and folder of the suite a `python -m bench` in cwd runs: this one, or a copy of it (a
    test's, with a made-up technique) whose bench/ and scripts are imported from there (torch, pandas and the rest
    as they are here)."""
    home = os.path.realpath(cwd)
    if home == ROOT:
        return launch, ROOT
    for name, module in list(sys.modules.items()):
        where = os.path.realpath(getattr(module, "__file__", None) or "")
        if os.path.dirname(where) == ROOT or where.startswith(os.path.join(ROOT, "bench") + os.sep):
            del sys.modules[name]
    sys.path[0] = home
    from bench.stages.running import launch as its_launch

    return its_launch, home


def popen_forked(handler, args, env, fresh=subprocess_handler.SubprocessHandler._popen):
    """SubprocessHandler._popen in torchrun's agent run here: its worker forked from the agent (see above), in a
    session of its own as torchrun starts it, else started as fresh does."""
    python = args[0] == sys.executable and [a for a in args[1:3] if a != "-u"][0].endswith(".py")
    if not python or not started_alike(env, WORKER_ENV):
        return fresh(handler, args, env)
    out, err = (f.fileno() if f else fd for f, fd in ((handler._stdout, 1), (handler._stderr, 2)))
    return fork_run(list(args[1:]), env, out, err, first=[os.setsid], stdin=False)


def child(request, replies):
    replies.close()
    os.sched_setaffinity(0, request["cores"])  # the cores of the test that asked, as its own child would inherit
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    own_output(*(os.open(request[k], os.O_WRONLY | os.O_CREAT | os.O_TRUNC) for k in ("out", "err")))
    if request["argv"][:2] == ["-m", "bench"]:
        its_launch, home = suite_at(request["cwd"])
        its_launch.start = forking(its_launch, home)
    end(as_main(request["argv"]))


def main():
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing but replies on the reply pipe
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request, replies)
        list_forked(pid, request["argv"], request["env"])
        replies.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")


if __name__ == "__main__":
    main()

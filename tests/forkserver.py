"""A process that has imported torch once and forks a fresh child for each script a test runs.

`import torch` takes seconds on the 2-core CI machines and most script runs in the tests (the bad-input sweeps)
end within a second of it. helpers.run sends `python SCRIPT.py ARGS`, `python -m bench ARGS` (the bench and
its imports, pandas, matplotlib and scipy, are imported here once too) and `python -m torch.distributed.run ARGS`
(torchrun: the agent forked, its workers fresh interpreters as it starts them) here instead of starting an interpreter,
when the test asks for nothing the interpreter would read at its start (no environment of its own, no limits).
The child is a process of its own, as a user's would be: it runs the script as __main__ with its own argv,
working folder, stdout and stderr (files), and exits with the script's exit code, a traceback printed as Python
prints one. The server itself never runs a torch operation, so no thread pool is forked half-made.

Protocol, one JSON line each way: {"argv": [...], "cwd": ..., "env": {...}, "out": PATH, "err": PATH} -> {"pid": N},
then
{"status": CODE} when the child has ended (the caller may kill pid first, on its own timeout).
"""

import atexit
import json
import os
import runpy
import sys
import traceback

import numpy  # noqa: F401
import PIL.Image  # noqa: F401
import torch  # noqa: F401
import torchvision  # noqa: F401
import tqdm  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository: bench/
import bench.cli  # noqa: E402, F401  (python -m bench: pandas, matplotlib, scipy, jinja2 and the bench itself)
import bench.modes  # noqa: E402

bench.modes.registered()  # every mode's module, as python -m bench imports them when it reads its flags


def child(request, replies):
    replies.close()
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    for fd, path in (1, request["out"]), (2, request["err"]):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)
    sys.stdin = open(0)  # noqa: SIM115
    sys.stdout, sys.stderr = open(1, "w", buffering=1), open(2, "w", buffering=1)  # noqa: SIM115
    argv = list(request["argv"])
    module = argv[1] if argv[0] == "-m" else None  # python -m MODULE ARGS: the module found from the working folder
    sys.argv = [module, *argv[2:]] if module else argv
    sys.path[0] = os.getcwd() if module else os.path.dirname(os.path.abspath(argv[0]))
    code = 0
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main():
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing but replies on the reply pipe
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request, replies)
        replies.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")


if __name__ == "__main__":
    main()

"""The tests' fork server (tests/forkserver.py): a bench's run is forked from the bench's process only where a new
interpreter would run it alike, and then runs as one would: its own argv, environment, output, exit code, signal
handlers and exit functions, the scripts' modules imported anew."""

import json
import os
import textwrap
from pathlib import Path

import psutil
import pytest

from helpers import FORKED, ROOT, assert_no_orphans, run

PROBE = """
import atexit, json, os, signal, sys, time
said = dict(torch="torch" in sys.modules, loader="loader" in sys.modules, argv=sys.argv[1:], parent=os.getppid(),
            env=os.environ.get("PROBE_ENV"), cwd=os.getcwd())
said["sigterm"] = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
said["threads"] = sys.modules["torch"].get_num_threads() if said["torch"] else None
print(json.dumps(said))
print("to stderr", file=sys.stderr)
atexit.register(print, "the run's exit function")
if sys.argv[1] == "wait":
    time.sleep(60)
sys.exit(int(sys.argv[1]))
"""

# a bench's process, as the server's child makes it: torch imported, the bench's own handlers and exit functions,
# loader.py imported (its data check); each case started through start_forked, its exit and its kind of process said
BENCH = """
import atexit, json, os, signal, sys, threading, time
import psutil
sys.path[:0] = [{tests!r}, {root!r}]
import forkserver, loader
signal.signal(signal.SIGTERM, lambda *_: None)
atexit.register(print, "the bench's exit function")
probe, logs, said = sys.argv[1], sys.argv[2], {{}}
env = dict(os.environ, PROBE_ENV="given")

def start(case, arg, env=env, **kw):
    with open(os.path.join(logs, case), "w") as log:
        process = forkserver.start_forked([sys.executable, probe, arg], log, env, **kw)
    if arg == "wait":
        time.sleep(2)
        psutil.Process(process.pid).terminate()
    said[case] = [process.wait(), type(process).__name__]

start("forked", "3")
start("stopped", "wait")
start("limited", "0", memory_limit_mib=1 << 20)
start("threads", "0", env={{**env, "OMP_NUM_THREADS": "3", "TORCHINDUCTOR_CACHE_DIR": logs}})
start("other_start", "0", env={{**env, "MKL_NUM_THREADS": "7"}})
thread = threading.Thread(target=time.sleep, args=(5,))
thread.start()
start("threaded", "0")
print(json.dumps(dict(said, bench=os.getpid())))
"""

ARGS = dict(forked="3", stopped="wait", threads="0", limited="0", other_start="0", threaded="0")


def test_a_benchs_run_is_forked_only_where_an_interpreter_would_run_alike(tmp_path):
    probe, bench, logs = tmp_path / "probe.py", tmp_path / "bench.py", tmp_path / "logs"
    probe.write_text(PROBE)
    bench.write_text(textwrap.dedent(BENCH.format(tests=str(ROOT / "tests"), root=str(ROOT))))
    logs.mkdir()
    result = run(bench, probe, logs)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "the bench's exit function" and result.stdout.count("exit function") == 1, result.stdout
    said = json.loads(lines[-2])
    bench_pid = said.pop("bench")
    assert said["forked"] == [3, "Forked"] and said["stopped"] == [-15, "Forked"] and said["threads"] == [0, "Forked"]
    for case in "limited", "other_start", "threaded":  # a limit of memory, a start of its own, a thread: a new one
        assert said[case] == [0, "Popen"], case
    for case in said:
        log = (logs / case).read_text()
        run_said = json.loads(log.splitlines()[0])
        assert run_said["torch"] == (said[case][1] == "Forked"), case  # forked: torch came imported
        assert not run_said["loader"] and run_said["sigterm"] and run_said["env"] == "given", case
        assert run_said["argv"] == [ARGS[case]] and run_said["parent"] == bench_pid and run_said["cwd"] == str(ROOT)
        assert "to stderr" in log and ("the run's exit function" in log) == (case != "stopped"), case
        assert "the bench's exit function" not in log, case
    assert json.loads((logs / "threads").read_text().splitlines()[0])["threads"] == 3  # as OMP_NUM_THREADS=3 gives


WORKER = """
import json, os, sys
said = dict(torch="torch" in sys.modules, session=os.getsid(0) == os.getpid(), argv=sys.argv[1:])
with open(os.path.join(sys.argv[1], f"rank{os.environ['RANK']}.json"), "w") as f:
    json.dump(said, f)
print(f"rank {os.environ['RANK']} said", flush=True)
"""


@pytest.mark.skipif(bool(os.environ.get("TESTS_NO_FORKSERVER")), reason="TESTS_NO_FORKSERVER=1: nothing is forked")
def test_torchruns_workers_are_forked_from_its_agent_each_in_a_session_of_its_own(tmp_path):
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    result = run("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", 2, worker, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "rank 0 said" in result.stdout and "rank 1 said" in result.stdout  # their output is the agent's
    for rank in 0, 1:  # torch came imported: forked; a session of its own, as torchrun's Popen starts a worker
        assert json.loads((tmp_path / f"rank{rank}.json").read_text()) == dict(torch=True, session=True,
                                                                                 argv=[str(tmp_path)])  # fmt: skip


LEAVES = """
import os, sys, time
sys.path[:0] = [{tests!r}, {root!r}]
import forkserver
null = os.open(os.devnull, os.O_WRONLY)  # not this process's output, which its runner reads to the end
slow = [lambda: time.sleep(1)]  # a fork slow to start its run is listed all the same, before fork_run returns
forkserver.fork_run([sys.argv[1], sys.argv[2]], dict(os.environ), null, null, first=slow)  # outlives this
"""


def test_a_forked_process_left_running_is_an_orphan_though_its_command_line_is_the_servers(tmp_path):
    sleeper, leaves, marker = tmp_path / "sleeper.py", tmp_path / "leaves.py", tmp_path / "marker"
    sleeper.write_text("import time\ntime.sleep(120)\n")
    leaves.write_text(textwrap.dedent(LEAVES.format(tests=str(ROOT / "tests"), root=str(ROOT))))
    assert run(leaves, sleeper, marker).returncode == 0
    with pytest.raises(AssertionError, match="orphan processes left"):
        assert_no_orphans(marker)
    listed = [json.loads(line) for line in Path(FORKED).read_text().splitlines()]
    (pid,) = [pid for pid, _, argv in listed if argv == [str(sleeper), str(marker)]]
    process = psutil.Process(pid)
    process.kill()
    psutil.wait_procs([process], timeout=10)
    assert_no_orphans(marker)


CORES = """
import json, os, sys
print(json.dumps(dict(torch="torch" in sys.modules, cores=sorted(os.sched_getaffinity(0)))))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: no share of the cores to keep to")
def test_a_forked_process_keeps_to_the_cores_of_the_test_that_ran_it(tmp_path):
    """make test's parallel pass keeps an end-to-end test to its worker's share of the cores (tests/suite.py), a
    test beside its module to every core, one after the other in one worker: whichever the server started with, its
    child has the cores of the test that asked, as a child of the test's own would."""
    probe, every = tmp_path / "cores.py", sorted(os.sched_getaffinity(0))
    probe.write_text(CORES)
    try:
        for share in every[:1], every:
            os.sched_setaffinity(0, share)
            result = run(probe)
            assert result.returncode == 0, result.stderr
            said = json.loads(result.stdout)
            assert said == dict(torch=not os.environ.get("TESTS_NO_FORKSERVER"), cores=share)
    finally:
        os.sched_setaffinity(0, every)

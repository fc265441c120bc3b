"""Files from users are read without running code: no pickle of user files, torch.load only with weights_only."""

import ast
import os
import pickle

from helpers import ROOT, train


def python_files():
    """The repository's own: not data/ and results/, nor a hidden folder (.venv, .torch-2.11: torch's code, .git)."""
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in ("data", "results") and not d.startswith(".")]
        yield from (os.path.join(folder, f) for f in files if f.endswith(".py"))


def unsafe_calls(source):
    """Calls that can run code from a file: pickle loads, read_pickle, allow_pickle, torch.load without weights_only."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
        if name in ("pickle.load", "pickle.loads", "pd.read_pickle", "pandas.read_pickle"):
            found.append(name)
        elif keywords.get("allow_pickle") == "True":
            found.append(f"{name}(allow_pickle=True)")
        elif name == "torch.load" and keywords.get("weights_only") != "True":
            found.append("torch.load without weights_only=True")
    return found


def test_no_code_reads_files_with_pickle():
    files = list(python_files())
    assert len(files) >= 10
    problems = {f: unsafe_calls(open(f).read()) for f in files}
    assert not {f: p for f, p in problems.items() if p}


def test_the_scan_finds_what_it_looks_for():
    assert unsafe_calls("import pickle\npickle.load(open('x', 'rb'))") == ["pickle.load"]
    assert unsafe_calls("torch.load('x.pt')") == ["torch.load without weights_only=True"]
    assert unsafe_calls("torch.load('x.pt', weights_only=True)") == []
    assert unsafe_calls("np.load('x.npy', allow_pickle=True)") == ["np.load(allow_pickle=True)"]


class Payload:
    """Unpickling this would create the file `marker`."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_tampered_cifar_batch_is_refused_unread(tmp_path):
    """torchvision checks each CIFAR-10 file's MD5 before it unpickles anything."""
    folder = tmp_path / "cifar" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    marker = tmp_path / "code-ran"
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        (folder / name).write_bytes(pickle.dumps(Payload(str(marker))))
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", folder.parent, metrics)
    assert result.returncode == 2 and "CIFAR-10" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not marker.exists(), "a pickle from the data folder was loaded"

"""Plumbing for the loaders, kept out of their tutorial diffs: image files that cannot be read, DALI's versions.

    check_files(paths, read)                  before training: every file's ends, a suspect one read in full
    explain_dali_error(error, paths, read)    a one-line message for a DALI failure, naming the image
    known_arguments(operator, **arguments)    those of the arguments the installed DALI's operator takes

loader.py and loader_dali.py import it; it is not a variant.
"""

import os
from concurrent.futures import ThreadPoolExecutor


def looks_whole(path):
    """Whether a file starts and ends as a whole JPEG (FFD8 ... FFD9) or PNG (... IEND) does: 20 bytes read."""
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(max(0, os.fstat(f.fileno()).st_size - 16))
        tail = f.read().rstrip(b"\0")
    return head[:2] == b"\xff\xd8" and tail.endswith(b"\xff\xd9") or head == b"\x89PNG" and b"IEND" in tail


def ends_whole(paths):
    return [looks_whole(path) for path in paths]


def check_files(paths, read, threads=8, chunk=2048):
    """Look at the ends of every file; read each one that does not look whole with `read`, which ends the
    run naming it if it is truly unreadable. Truncated, empty and non-image files are so found before
    training starts, not when an epoch happens to reach them (and before DALI 2.4's CPU decoder, which
    can crash on them, sees them). Threads, in chunks, for a cold disk or a network file system: 60,000
    files in the page cache took 1.3 s on 2 cores (0.8 s one by one), so a million take 10 to 25 s."""
    with ThreadPoolExecutor(threads) as pool:
        whole = [ok for part in pool.map(ends_whole, [paths[i : i + chunk] for i in range(0, len(paths), chunk)])
                 for ok in part]  # fmt: skip
    for path, ok in zip(paths, whole):
        if not ok:
            read(path)


def first_undecodable(paths):
    """The first of paths that DALI's decoder refuses, decoding one image at a time on the CPU (the step
    that fails is the image's index, as DALI's authors advise); None if it decodes them all."""
    from nvidia.dali import Pipeline, fn, types

    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None, exec_async=False, exec_pipelined=False)
    with pipe:
        encoded, _ = fn.readers.file(files=paths, random_shuffle=False)
        pipe.set_outputs(fn.decoders.image(encoded, device="cpu", output_type=types.RGB))
    pipe.build()
    for path in paths:
        try:
            pipe.run()
        except RuntimeError:
            return path
    return None


OUT_OF_MEMORY = ("out of memory", "cudaerrormemoryallocation", "cuda allocation failed", "bad_alloc")


def explain_dali_error(error, paths, read):
    """A one-line message for DALI's error. DALI names a file it cannot open, not one it cannot decode:
    then every image is read as loader.py reads them (`read` ends the run naming the first bad one), and
    failing that, decoded by DALI one at a time (minutes on ImageNet). Out of memory is said at once."""
    lines = [line.strip() for line in error.split("encountered:")[-1].splitlines() if line.strip()]
    reason = lines[0] if lines else error
    if any(words in error.lower() for words in OUT_OF_MEMORY):
        return f"out of memory in DALI, try a smaller --batch-size: {reason[:300]}"
    if "fn.readers.file" in error or "fn.decoders.image" in error:
        for path in paths:
            if path in reason:
                return f"cannot read image {path}: {reason}"
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(read, paths, chunksize=64))
        path = first_undecodable(paths)
        if path is not None:
            return f"cannot read image {path}: DALI's decoder refuses it ({reason})"
    return f"DALI failed: {reason}"


def known_arguments(operator, **arguments):
    """The arguments that the installed DALI's operator (its schema name, e.g. readers__File) accepts: an
    optional argument newer or older than the DALI at hand is left out rather than failing the pipeline."""
    from nvidia.dali import backend

    schema = backend.GetSchema(operator)
    return {name: value for name, value in arguments.items() if schema.HasArgument(name)}

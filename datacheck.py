"""Plumbing for the loaders, kept out of their tutorial diffs: image files that cannot be read, DALI's versions.

    check_files(paths, read)                  before training: every file's ends and size, a suspect one read in full
    output_problem(path)                      why a metrics file cannot be written there, before the work
    write_whole(path, text)                   write it whole or not at all (a full disk leaves no partial file)
    explain_dali_error(error, paths, read)    a one-line message for a DALI failure, naming the image
    known_arguments(operator, **arguments)    those of the arguments the installed DALI's operator takes

loader.py and loader_dali.py import it; it is not a variant.
"""

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor

from PIL import Image

HEAD = 4096  # bytes read from the start of a file: a JPEG's size is there unless its metadata is longer


def pixel_limit():
    """Pillow refuses to open an image of more pixels than this (a decompression bomb); DALI would decode it,
    so both loaders refuse it before training, with Pillow's message."""
    return 2 * Image.MAX_IMAGE_PIXELS if Image.MAX_IMAGE_PIXELS else float("inf")


def header_pixels(head):
    """Width x height as a PNG's or a JPEG's first bytes give them (the IHDR chunk, a SOFn segment), or None."""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        return int.from_bytes(head[16:20], "big") * int.from_bytes(head[20:24], "big")
    i = 2
    while head[:2] == b"\xff\xd8" and i + 9 <= len(head) and head[i] == 0xFF:
        marker = head[i + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # start of frame: height, width
            return int.from_bytes(head[i + 5 : i + 7], "big") * int.from_bytes(head[i + 7 : i + 9], "big")
        i += 1 if marker == 0xFF else 2 + int.from_bytes(head[i + 2 : i + 4], "big")
    return None


def looks_whole(path):
    """Whether a file starts and ends as a whole JPEG (FFD8 ... FFD9) or PNG (... IEND) does, and has no more
    pixels than Pillow opens: its first 4 KiB and last 16 bytes read (the header parsed by Pillow if longer)."""
    with open(path, "rb") as f:
        head = f.read(HEAD)
        f.seek(max(0, os.fstat(f.fileno()).st_size - 16))
        tail = f.read().rstrip(b"\0")
    jpeg, png = head[:2] == b"\xff\xd8", head[:4] == b"\x89PNG"
    if not (jpeg and tail.endswith(b"\xff\xd9") or png and b"IEND" in tail):
        return False
    pixels = header_pixels(head)
    if pixels is None:
        try:
            with Image.open(path) as image:
                pixels = image.width * image.height
        except Exception:  # Pillow says why when the file is read in full
            return False
    return pixels <= pixel_limit()


def ends_whole(paths):
    return [looks_whole(path) for path in paths]


def check_files(paths, read, threads=4, chunk=256):
    """Look at the ends and the size of every file; read each one that does not look whole with `read`,
    which ends the run naming it if it is truly unreadable. Truncated, empty, non-image and oversized
    files are so found before training starts, not when an epoch happens to reach them (and before
    DALI 2.4's CPU decoder, which can crash on them or decode a bomb, sees them). Threads, in chunks, for
    a cold disk or a network file system: the 60,000 files of data/small took 4.2 s read from disk and
    2.0 s from the page cache on 2 cores (one thread: 5.8 and 0.95 s), so a million take 35 to 70 s."""
    with ThreadPoolExecutor(threads) as pool:
        whole = [ok for part in pool.map(ends_whole, [paths[i : i + chunk] for i in range(0, len(paths), chunk)])
                 for ok in part]  # fmt: skip
    for path, ok in zip(paths, whole):
        if not ok:
            read(path)


def output_problem(path):
    """Why a file cannot be written at path (a folder, a missing folder, no permission), or None."""
    if os.path.isdir(path):
        return "it is a folder"
    try:
        with open(path + ".tmp", "w"):
            pass
        os.remove(path + ".tmp")
    except OSError as e:
        return e.strerror or str(e)
    return None


def write_whole(path, text):
    """Write text to path through a temporary file and a rename: whole or not at all. Return why it could
    not be written (a full disk, say), with the temporary file removed, or None."""
    try:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(path + ".tmp")
        return e.strerror or str(e)
    return None


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

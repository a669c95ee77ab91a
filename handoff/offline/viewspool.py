"""The JSON pod views of a parallel triage (``offline.fanout``): each worker writes its
pods' views, in its own rank order, to a spool file; the parent writes them out in the
report's order straight from the spools' bytes, a thousand views per system call.

Each view is spooled after the ``,\\n`` that parts it from the view before it in the
report, so the parent writes the spooled bytes as they are (the report's first view
without its comma): no copy and no call per view in the parent, which writes only once
the last worker is done, while the other cores are idle.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from array import array
from collections.abc import Iterable, Sequence
from itertools import accumulate, chain
from typing import IO

SEPARATOR = b",\n"
# Views per write: IOV_MAX, the most buffers one writev takes (1024 on Linux, the BSDs).
BATCH = 1024


# A view is ≈ 2 KB: with the default 8 KiB buffer a worker made a write call every few
# views (0.07 s of CPU for 21,000 views; 0.02 s with this buffer).
SPOOL_BUFFER = 1 << 18


def new_spool() -> IO[bytes]:
    """An unnamed file, made before the fork: its worker writes it, the parent reads it."""
    return tempfile.TemporaryFile(buffering=SPOOL_BUFFER)


def spool_views(spool: IO[bytes], views: Iterable[bytes]) -> array[int]:
    """Write serialised views to ``spool``, each after its separator; the spooled size of
    each, in order."""
    sizes = array("q")
    write, size = spool.write, sizes.append
    for view in views:
        write(SEPARATOR)
        write(view)
        size(len(view) + len(SEPARATOR))
    spool.flush()
    return sizes


def write_in_order(
    out: IO[bytes],
    opening: bytes,
    spools: Sequence[IO[bytes]],
    sizes: Sequence[array[int]],
    order: Sequence[int],
    closing: bytes,
) -> None:
    """``opening``, the spooled views in ``order`` (indexes into every spool's views laid
    end to end), then ``closing``."""
    spooled: list[memoryview] = []
    for spool, spool_sizes in zip(spools, sizes, strict=True):
        if spool_sizes:
            data = _mapped(spool)
            ends = list(accumulate(spool_sizes))
            spooled.extend(map(data.__getitem__, map(slice, chain((0,), ends), ends)))
    pieces: list[bytes | memoryview] = [opening]
    pieces.extend(map(spooled.__getitem__, order))
    if len(pieces) > 1:
        pieces[1] = pieces[1][1:]  # the first view has no comma before it
    pieces.append(closing)
    write_pieces(out, pieces)


def _mapped(spool: IO[bytes]) -> memoryview:
    """The spool's bytes where they lie, mapped in at once (``MAP_POPULATE``: one call,
    not a page fault per page as a view is written); unmapped when the last slice of
    it goes. Reading 50 MB into one ``bytes`` took longer than writing it out."""
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
    try:
        return memoryview(mmap.mmap(spool.fileno(), 0, flags=flags, prot=mmap.PROT_READ))
    except OSError:  # a TMPDIR whose file system cannot map files: read, as before
        spool.seek(0)
        return memoryview(spool.read())


def write_pieces(out: IO[bytes], pieces: Sequence[bytes | memoryview]) -> None:
    """Write ``pieces`` one after another: by ``os.writev`` to the file under ``out``,
    or joined a batch at a time when ``out`` has none (a test's ``BytesIO``)."""
    try:
        fd: int | None = out.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        fd = None
    out.flush()
    for start in range(0, len(pieces), BATCH):
        batch = pieces[start : start + BATCH]
        if fd is None:
            out.write(b"".join(batch))
            continue
        written = os.writev(fd, batch)
        if written < sum(map(len, batch)):  # a short write: the rest, a call at a time
            rest = memoryview(b"".join(batch))[written:]
            while rest:
                rest = rest[os.write(fd, rest) :]

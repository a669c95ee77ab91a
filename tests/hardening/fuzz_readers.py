"""Coverage-guided fuzzing (atheris, libFuzzer) of everything that reads untrusted input:
the trace reader, every importer, the fold and the report. Any exception is a crash.

    python -m tests.hardening.fuzz_readers -runs=100000 [corpus dir]

tests/hardening/test_fuzz_readers.py runs it for a bounded number of inputs in CI, seeded
with the scripted traces and the real files.
"""

from __future__ import annotations

import io
import sys

import atheris

with atheris.instrument_imports():
    from handoff.core.report import build_report
    from handoff.core.timeline import fold
    from handoff.core.trace import TraceReader
    from handoff.interop.importers import open_events


def one_input(data: bytes) -> None:
    for reader in (TraceReader(io.BytesIO(data)), open_events(io.BytesIO(data))):
        events = list(reader)
        for error in reader.errors:
            if error.line < 1:
                raise AssertionError(f"an error without a line: {error}")
        build_report(fold(events), errors=reader.errors)


def main(argv: list[str]) -> None:
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)

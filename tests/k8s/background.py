"""A piece of a k8s test's setup run in a thread from the start of the k8s tests, when
what it waits for (a scenario's fixed duration on a control plane of its own) needs no
other test: its result is ready by the time the test that reads it comes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class InBackground(Generic[T]):
    """``work()`` in a daemon thread; ``result`` waits for its value (or raises what it
    raised)."""

    def __init__(self, name: str, work: Callable[[], T]) -> None:
        self._work = work
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as exc:  # handed to the test that reads the result
            self._error = exc

    def result(self, timeout: float) -> T:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"{self._thread.name} did not finish within {timeout:.0f}s")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

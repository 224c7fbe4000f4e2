"""Ctrl-C: never in the middle of writing a checkpoint and its history line."""
from __future__ import annotations

import signal
import threading
from typing import Any


class deferred_sigint:
    """Context manager: a SIGINT (Ctrl-C) that arrives inside the block is raised as
    ``KeyboardInterrupt`` when the block ends, so what the block writes stays whole.

    Only in the main thread, and only while Python's default handler is installed;
    elsewhere it does nothing.
    """

    def __enter__(self) -> "deferred_sigint":
        self._received = False
        self._previous: Any = None
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, signum: int, frame: Any) -> None:
        self._received = True

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if self._received:
            raise KeyboardInterrupt

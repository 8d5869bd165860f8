"""Ctrl-C (a notebook's stop button) raises KeyboardInterrupt wherever Python is: between admitting a request
and marking it running, halfway through freeing a block table. The engine's clean-up therefore recomputes its
state from scratch instead of undoing step by step (LLMEngine.abort_all), so running it twice is running it
once, and `finish_despite_interrupts` runs it to its end even if Ctrl-C is pressed again meanwhile.
`caused_by_interrupt` tells an interrupt that a library re-raised as its own error from a real failure.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """SIGINT is only recorded while the block runs, then handed to the handler that was there (Python's
    raises KeyboardInterrupt). Main thread only (where Python runs handlers), over a Python handler only."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    got: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if got:
            previous(signal.SIGINT, None)


def finish_despite_interrupts(fn: Callable[[], None]) -> None:
    """Run the idempotent `fn` to its end, restarting it if a KeyboardInterrupt got through (raised before
    the hold took effect, or by code); the interrupt is then raised, never lost."""
    interrupted = False
    with sigint_held():
        while True:
            try:
                fn()
                break
            except KeyboardInterrupt:
                interrupted = True
    if interrupted:
        raise KeyboardInterrupt


def caused_by_interrupt(e: BaseException | None) -> bool:
    """Whether a KeyboardInterrupt is in e's chain of causes (raise ... from, or raised while handling it)."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False

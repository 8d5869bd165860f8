"""What Ctrl-C (a notebook's stop button) may interrupt, and how the engine's clean-up survives it.

Jupyter's "interrupt kernel" raises KeyboardInterrupt wherever Python happens to be: between admitting a
request and marking it running, halfway through freeing a block table. The clean-up after an interrupted
`generate` must therefore (1) not care where the interrupt landed: it recomputes the engine's state from
scratch instead of undoing step by step (LLMEngine.abort_all), so running it twice is the same as once;
and (2) not be stopped by a second interrupt: `finish_despite_interrupts` holds SIGINT back while it runs
and restarts it if an interrupt got through anyway, then raises the interrupt once it is done.

`caused_by_interrupt` tells an error that an interrupt turned into another exception (a compile worker or a
library wrapping it) from a real failure, so that startup's fallback ladder stops instead of trying the
next rung.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """While the block runs, SIGINT is only recorded; at its end the handler that was there gets it (Python's
    raises KeyboardInterrupt). Only in the main thread, where Python runs signal handlers, and only over a
    Python handler (not a signal that is ignored)."""
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
    """Run the idempotent `fn` to its end whatever Ctrl-C does meanwhile, then raise KeyboardInterrupt if
    one arrived during it (it is never lost, only postponed)."""
    interrupted = False
    with sigint_held():
        while True:
            try:
                fn()
                break
            except KeyboardInterrupt:  # before the handler took hold, or raised by code, not by a signal
                interrupted = True
    if interrupted:
        raise KeyboardInterrupt


def caused_by_interrupt(e: BaseException) -> bool:
    """Whether a KeyboardInterrupt is in e's chain of causes (raise ... from, or raised while handling it)."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False

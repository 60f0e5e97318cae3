"""Questions in flight (``run.workers``): their LLM waits overlap, their computation does not.

Every question worker holds :data:`COMPUTE` while it computes; an LLM request releases it while it waits on the
server (``LLMClient.chat``). Only one question computes at a time, so shared memos (query vectors, path vectors,
lazily built indexes, counters) see no races. Each question computes what it would compute alone, because those
memos hold per-text values, not per-batch ones (``SentenceEmbedder.encode``). With an API or vLLM endpoint the
time goes to the waits, and those overlap.

The lock does not guard state that outlives a wait: a method must not keep one question's values on ``self``
across an LLM call (:class:`gear_repro.methods.base.Method`). None does (GEAR, SyncGE, IRCoT, HippoRAG, T²RAG keep
them in locals; their lazily built indexes and memos are per text).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ComputeLock:
    """A lock that question workers hold while computing and give up during I/O waits (:meth:`released`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = threading.local()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for the block (one question's work)."""
        with self._lock:
            self._held.on = True
            try:
                yield
            finally:
                self._held.on = False

    @contextmanager
    def released(self) -> Iterator[None]:
        """Give the lock up for the block when this thread holds it (an LLM request's wait), else do nothing."""
        if not getattr(self._held, "on", False):
            yield
            return
        self._held.on = False
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()
            self._held.on = True


COMPUTE = ComputeLock()

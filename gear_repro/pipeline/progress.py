"""The per-question progress bar of a run (``run.progress``)."""

from __future__ import annotations

import time
from collections.abc import Callable

from tqdm import tqdm

__all__ = ["QuestionBar"]


class QuestionBar:
    """The per-question progress bar: questions done, elapsed time, seconds per question and the ETA, both measured
    from the first finished question on. The first question also pays the run's lazy set-up (an embedder loaded, a
    corpus encoded, an index built: minutes), so an ETA from it would say hundreds of hours; until a second
    question has finished the ETA reads "?"."""

    def __init__(self, total: int, desc: str, *, disable: bool = False, clock: Callable[[], float] = time.monotonic,
                 file: object = None) -> None:
        self.total, self.clock = total, clock
        self.finished = 0  # counted here: a disabled tqdm counts nothing
        self.first: float | None = None  # when the first question finished
        self.bar = tqdm(total=total, desc=desc, disable=disable, unit="q", dynamic_ncols=True, file=file,
                        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]", postfix="eta ?")

    def done(self) -> None:
        """One more question finished."""
        now = self.clock()
        self.finished += 1
        if self.first is None:
            self.first = now
        else:
            per = (now - self.first) / (self.finished - 1)
            eta = tqdm.format_interval(per * (self.total - self.finished))
            self.bar.set_postfix_str(f"{per:.1f} s/q, eta {eta}", refresh=False)
        self.bar.update(1)

    def __enter__(self) -> QuestionBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()

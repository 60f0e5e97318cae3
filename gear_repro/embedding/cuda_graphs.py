"""One CUDA graph per fixed pass shape of ``encode_fixed`` (``embedder.cuda_graphs``, docs/encoders.md).

The exact path scorer (GEAR §4.2) encodes a step's paths in passes of a few fixed shapes (``rows`` × a multiple of
``LENGTH_STEP`` word pieces). On a GPU such a MiniLM pass is a hundred or so small kernel launches driven by Python,
and the passes ran one after another, each waiting for its inputs' copy: the launches and the host, not the
arithmetic, set the time (NaiveGE's cold first pass was 4.2-5.5× a hybrid retrieval on an H200). Here a graph
captured once per shape replays all of a pass's kernels in one launch; a call's inputs reach the GPU in one copy,
and passes of different shapes run side by side, each shape on its own stream with its own memory pool (and so
its own cuBLAS workspace). A graph runs the kernels the eager pass chose for its shape, and every pass of a shape
replays the same graph, so a path's vector still depends on its text alone: bit-identical to the eager passes and
across batch compositions (measured on an H200, ``benchmarks/bench_gpu.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

WARMUP_PASSES = 2  # eager passes on the shape's stream before its capture: cuBLAS and the allocator set up outside it

Forward = Callable[[dict[str, Any]], Any]  # device tensors of one pass -> its [rows, dim] float32 vectors


@dataclass
class _Shape:
    """A captured pass shape: replay, static inputs and output (overwritten by each replay), its stream."""

    replay: Callable[[], None]
    static_in: dict[str, Any]
    static_out: Any
    stream: Any


class ShapeGraphs:
    """``forward`` replayed from graphs captured per pass shape; :meth:`encode` runs a call's passes."""

    def __init__(self, forward: Forward, device: str, dim: int):
        self.forward = forward
        self.device = device
        self.dim = dim
        self._shapes: dict[tuple[int, ...], _Shape] = {}
        self.captured = 0  # shapes captured
        self.replays = 0

    def encode(self, passes: Sequence[tuple[int, dict[str, Any]]]) -> Any:
        """The vectors of ``passes`` (each: how many of its first rows to keep, and its host int64 tensors, every
        field of the pass's shape), the kept rows in pass order, as one device tensor once every pass is done."""
        with self._on_device():  # the model's GPU, where the caller's current device may be another
            return self._encode(passes)

    def _encode(self, passes: Sequence[tuple[int, dict[str, Any]]]) -> Any:
        import torch

        keys = list(passes[0][1])
        flat = {k: self._to_device(torch.cat([feats[k].reshape(-1) for _, feats in passes])) for k in keys}
        views, at = [], 0
        for _, feats in passes:
            shape = tuple(feats["input_ids"].shape)
            size = shape[0] * shape[1]
            views.append({k: flat[k][at:at + size].view(shape) for k in keys})
            at += size
        current = self._current_stream()
        # allocated on the caller's stream, which waits for every pass below before it may reuse the memory
        out = torch.empty((sum(n for n, _ in passes), self.dim), dtype=torch.float32, device=self.device)
        used: dict[tuple[int, ...], _Shape] = {}
        row = 0
        for (n, _), feats in zip(passes, views, strict=True):
            shape = tuple(feats["input_ids"].shape)
            entry = self._shapes.get(shape)
            if entry is None:
                entry = self._shapes[shape] = self._capture({k: v.clone() for k, v in feats.items()})
                self.captured += 1
            if shape not in used:
                used[shape] = entry
                self._wait(entry.stream, current)  # the inputs' copy, and earlier work of the caller's stream
            with self._on(entry.stream):
                for key, value in feats.items():
                    entry.static_in[key].copy_(value)
                entry.replay()
                out[row:row + n].copy_(entry.static_out[:n])  # before the shape's next replay overwrites it
            row += n
            self.replays += 1
        for entry in used.values():
            self._wait(current, entry.stream)
        return out

    def _on_device(self) -> AbstractContextManager[object]:
        import torch

        return torch.cuda.device(self.device)

    def _to_device(self, tensor: Any) -> Any:
        """A host tensor on the device, copied from pinned memory without holding the host."""
        return tensor.pin_memory().to(self.device, non_blocking=True)

    def _current_stream(self) -> Any:
        import torch

        return torch.cuda.current_stream(self.device)

    @staticmethod
    def _wait(stream: Any, other: Any) -> None:
        """``stream`` waits for the work queued on ``other`` so far."""
        stream.wait_stream(other)

    @staticmethod
    def _on(stream: Any) -> AbstractContextManager[object]:
        import torch

        return torch.cuda.stream(stream)

    def _capture(self, static_in: dict[str, Any]) -> _Shape:
        """``forward`` on ``static_in``'s shape captured on a new stream, into a memory pool of its own."""
        import torch

        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(self._current_stream())
        with torch.cuda.stream(stream):
            for _ in range(WARMUP_PASSES):
                self.forward(static_in)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):  # private pool: graphs of other shapes may run meanwhile
            static_out = self.forward(static_in)
        return _Shape(graph.replay, static_in, static_out, stream)

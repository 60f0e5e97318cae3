"""Encoder precision (``embedder.precision``): fp32, bf16 (``torch.autocast`` with the linear layers converted to
bfloat16 once, at load: :func:`gear_repro.embedding.bf16.pack_linears`), bf16 only where the device computes it
natively, or fp16 (``torch.autocast`` to float16; CUDA only) (measured speed and agreement with fp32 in
docs/encoders.md). ``embedder.device=auto`` is resolved once, here (:func:`resolve_device`).

A CPU without bf16 instructions (x86 ``avx512_bf16`` / ``amx_bf16``, Arm ``bf16``) runs bf16 by emulation, slower
than fp32: ``auto`` then picks fp32, and an explicit ``bf16`` is a :class:`ConfigError` rather than a silent
slow-down. The precision that runs is part of the embedding cache key (``SentenceEmbedder.model_id``).
"""

from __future__ import annotations

import os
from enum import Enum
from functools import cache
from pathlib import Path

from gear_repro.utils.errors import ConfigError

# /proc/cpuinfo flags of native bf16 arithmetic: x86 AVX512-BF16 and AMX-BF16, Arm's BF16 extension
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
# oneDNN ISA caps (ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA) under which its kernels still compute bf16 natively; any
# other cap (AVX2, AVX512_CORE, ...) makes torch's bf16 linears fail or emulate, whatever the CPU's flags say
ONEDNN_BF16_ISAS = ("ALL", "DEFAULT", "AVX2_VNNI_2", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX",
                    "AVX512_CORE_AMX_FP16", "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", "AVX10_2_512",
                    "AVX10_2_512_AMX_2")
# back-ends that run bf16: torch (autocast, packed linears) and OpenVINO (its CPU plugin's bf16 inference precision)
BF16_BACKENDS = ("torch", "openvino")


class Precision(str, Enum):
    """``embedder.precision``: what the transformer computes in (member names = values)."""

    fp32 = "fp32"  # float32 throughout (default: the recorded numbers, the same on every machine)
    bf16 = "bf16"  # matrix products in bfloat16 (autocast, linear weights packed at load); needs native bf16
    auto = "auto"  # bf16 where the device computes it natively, else fp32 (one log line says which)
    fp16 = "fp16"  # matrix products in float16 (autocast); CUDA only: CPUs have no fast float16 matrix products

    def __str__(self) -> str:
        return self.value


class QueryPrecision(str, Enum):
    """``embedder.query_precision``: what the query-side texts (questions and sub-queries, HippoRAG's query
    entities, GRIEVER's query tokens) are encoded in when ``embedder.precision`` runs bf16. On the MuSiQue sample
    every R@k that moved under bf16 moved through the question vector, not the corpus (docs/encoders.md)."""

    fp32 = "fp32"  # queries by a torch fp32 twin of the model (default): one encode per retrieval, bulk work stays bf16
    same = "same"  # queries in embedder.precision as well (what earlier bf16 runs did)

    def __str__(self) -> str:
        return self.value


def cpu_flags(cpuinfo: str) -> set[str]:
    """The feature flags of a /proc/cpuinfo text (x86 ``flags``, Arm ``Features`` lines)."""
    out: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            out.update(value.split())
    return out


@cache
def _proc_cpuinfo() -> str:
    p = Path("/proc/cpuinfo")
    return p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""


def resolve_device(device: str) -> str:
    """The torch device ``embedder.device`` names: ``auto`` = the first CUDA device where torch sees one, else
    the CPU (mps is never picked for the user: its bf16 is not detected, docs/encoders.md); anything else as is."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device: str, key: str = "embedder.device") -> None:
    """Start-up check that torch can place a tensor on ``device`` (``cpu``, ``cuda``, ``cuda:N``, ``mps``, ...), else a
    ConfigError naming ``key``; without it each question would fail on the model load (``Torch not compiled with
    CUDA enabled``)."""
    if device == "cpu":
        return
    import torch

    try:
        dev = torch.device(device)
        if dev.type == "meta":  # shapes only, no values
            raise ValueError("the meta device holds no values")
        torch.empty(0, device=dev)
    except (RuntimeError, AssertionError, ValueError) as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0].split(". ")[0][:200]
        raise ConfigError(f"{key}='{device}' cannot be used here ({why}); e.g. {key}=cpu") from None


def native_bf16(device: str, cpuinfo: str | None = None) -> tuple[bool, str]:
    """Whether ``device`` computes bf16 natively, and the evidence (for the log line). CPU: the flags of
    ``cpuinfo`` (default /proc/cpuinfo; none readable = no); CUDA: ``torch.cuda.is_bf16_supported`` without
    emulation; other devices (mps): no."""
    device = resolve_device(device)
    if device.startswith("cuda"):
        import torch

        ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
        return ok, f"torch.cuda.is_bf16_supported = {ok}"
    if device != "cpu":
        return False, f"no bf16 detection for device '{device}'"
    hits = sorted(cpu_flags(_proc_cpuinfo() if cpuinfo is None else cpuinfo) & set(NATIVE_BF16_FLAGS))
    if not hits:
        return False, "no avx512_bf16/amx_bf16/bf16 CPU flag"
    for var in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        cap = os.environ.get(var, "").strip().upper()
        if cap and cap not in ONEDNN_BF16_ISAS:
            return False, f"CPU flags {', '.join(hits)}, but {var}={cap} keeps oneDNN's kernels below bf16"
    return True, f"CPU flags {', '.join(hits)}"


def resolve_precision(value: str | Precision, device: str = "cpu", backend: str = "torch",
                      cpuinfo: str | None = None) -> Precision:
    """The precision that runs (fp32, bf16 or fp16) for the setting ``value``: ``auto`` -> bf16 where native, else
    fp32; ``bf16`` where it is not native, or with a back-end that has no bf16 (onnx, onnx-int8) -> ConfigError;
    ``fp16`` anywhere but torch on CUDA -> ConfigError (a CPU would emulate it, slower than fp32). OpenVINO always
    runs on the CPU, so its native bf16 is the CPU's."""
    try:
        want = Precision(value)
    except ValueError:
        raise ConfigError(f"embedder.precision must be one of {[p.value for p in Precision]}, got '{value}'") from None
    if want is Precision.fp32:
        return want
    device = resolve_device(device)
    if want is Precision.fp16:
        if backend != "torch" or not device.startswith("cuda"):
            raise ConfigError(f"embedder.precision=fp16 runs with embedder.backend=torch on a CUDA device (got "
                              f"backend '{backend}', device '{device}'); on a CPU use fp32, or bf16/auto where the "
                              "CPU has native bf16 (docs/encoders.md)")
        return want
    if backend not in BF16_BACKENDS:
        if want is Precision.bf16:
            raise ConfigError(f"embedder.precision=bf16 needs embedder.backend=torch or openvino (got '{backend}')")
        return Precision.fp32
    if backend == "openvino":
        device = "cpu"
    ok, why = native_bf16(device, cpuinfo)
    if want is Precision.bf16 and not ok:
        raise ConfigError(f"embedder.precision=bf16: {device} has no native bf16 ({why}), so bf16 would run by "
                          "emulation, slower than fp32; use embedder.precision=fp32 or auto (docs/encoders.md)")
    return Precision.bf16 if ok else Precision.fp32

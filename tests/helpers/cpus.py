"""Pretend CPUs: abridged /proc/cpuinfo texts, so a test of a CPU-dependent choice runs the same on any machine."""

from __future__ import annotations

import pytest

import gear_repro.embedding.precision as P

# an AMD EPYC with avx512_bf16, an AVX-512 CPU without bf16, an AVX2-only CPU, an Arm CPU with bf16
EPYC = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni avx512_bf16 vaes\nmodel name\t: AMD EPYC\n"
SKYLAKE = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512bw avx512vl\n"
AVX2_ONLY = "processor\t: 0\nflags\t\t: fpu sse sse4_2 avx avx2 fma f16c bmi2\nmodel name\t: AMD EPYC 7B12\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.fixture()
def no_isa_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """No oneDNN ISA cap: tests of the bf16 choice for a pretend CPU read that CPU alone."""
    for var in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture()
def cpu(monkeypatch: pytest.MonkeyPatch):
    """``cpu(text)``: /proc/cpuinfo reads ``text`` for the rest of the test, and no oneDNN ISA cap is set (the
    pretend CPU is the whole story, also in ``make test-avx2``)."""
    def set_cpu(text: str) -> None:
        monkeypatch.setattr(P, "_proc_cpuinfo", lambda: text)
        for var in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
            monkeypatch.delenv(var, raising=False)
    return set_cpu

"""gear_repro: a reproduction harness for GEAR (Shen et al., 2025) and triple-graph retrievers."""

__version__ = "0.1.0"

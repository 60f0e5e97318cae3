"""Graph expansion (GEAR §4): triple index + entity adjacency, diverse triple beam search, NaiveGE/SyncGE."""

from gear_repro.graph.beam_search import Beam, BeamConfig, BeamResult, beam_search
from gear_repro.graph.triple_index import TripleIndex, normalize_entity, triple_docs

__all__ = ["Beam", "BeamConfig", "BeamResult", "beam_search", "TripleIndex", "normalize_entity", "triple_docs"]

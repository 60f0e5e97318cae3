"""Files in the formats earlier code wrote, for the readers that still accept them."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def save_unicode(g, path: str | Path) -> None:
    """A HippoRAG ``PhraseGraph`` as earlier caches held it: each name list one fixed-width unicode array."""
    m = g.passage_phrase
    np.savez_compressed(path, phrases=np.array(g.phrases, dtype=np.str_),
                        passage_ids=np.array(g.passage_ids, dtype=np.str_), edges=g.edges, weights=g.weights,
                        m_data=m.data, m_indices=m.indices, m_indptr=m.indptr, m_shape=np.array(m.shape),
                        version=np.array(g.version), stats=np.array(json.dumps(g.stats)))

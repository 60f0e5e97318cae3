"""Index backends: one retrieval contract, several engines (memory; Elasticsearch)."""

from gear_repro.backends.base import Backend, Collection, IndexDoc

__all__ = ["Backend", "Collection", "IndexDoc"]

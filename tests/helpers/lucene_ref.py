"""An independent Lucene reference for tests/test_lucene.py, written directly against pyjnius and never through
gear_repro's code: Elasticsearch 8's defaults for a ``text`` field and a ``match`` query, spelt out by hand.

Index: an in-memory ``ByteBuffersDirectory``, Lucene's default merge policy and RAM buffer, the ``standard``
analyzer (``StandardAnalyzer`` with an empty stop set), ``BM25Similarity(k1, b)``, the id in a stored
``StringField``, the text in a ``TextField`` (not stored; norms on). Query: the analysed tokens of the query text,
each a ``TermQuery`` SHOULD clause of a hand-built ``BooleanQuery`` (what ``match`` builds), searched with
``IndexSearcher.search(query, k)``; hit ids are read back from the stored field, so the reference does not assume
that doc ids follow insertion order.

The JVM is one per process: :func:`classes` sets the classpath only when no JVM runs yet (when one does, e.g.
started by ``LuceneBackend``, it must have Lucene on its classpath).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

_CACHE: dict[str, SimpleNamespace] = {}


def classes(jar: str) -> SimpleNamespace:
    if "c" not in _CACHE:
        import jnius_config

        if not jnius_config.vm_running:
            jnius_config.add_classpath(jar)
        from jnius import autoclass, find_javaclass

        _CACHE["c"] = SimpleNamespace(
            analyzer=autoclass("org.apache.lucene.analysis.standard.StandardAnalyzer"),
            empty=autoclass("org.apache.lucene.analysis.CharArraySet").EMPTY_SET,
            term_attr=find_javaclass("org.apache.lucene.analysis.tokenattributes.CharTermAttribute"),
            bm25=autoclass("org.apache.lucene.search.similarities.BM25Similarity"),
            config=autoclass("org.apache.lucene.index.IndexWriterConfig"),
            writer=autoclass("org.apache.lucene.index.IndexWriter"),
            reader=autoclass("org.apache.lucene.index.DirectoryReader"),
            directory=autoclass("org.apache.lucene.store.ByteBuffersDirectory"),
            document=autoclass("org.apache.lucene.document.Document"),
            string_field=autoclass("org.apache.lucene.document.StringField"),
            text_field=autoclass("org.apache.lucene.document.TextField"),
            store=autoclass("org.apache.lucene.document.Field$Store"),
            searcher=autoclass("org.apache.lucene.search.IndexSearcher"),
            boolean=autoclass("org.apache.lucene.search.BooleanQuery$Builder"),
            occur=autoclass("org.apache.lucene.search.BooleanClause$Occur"),
            term_query=autoclass("org.apache.lucene.search.TermQuery"),
            term=autoclass("org.apache.lucene.index.Term"),
            version=autoclass("org.apache.lucene.util.Version"),
        )
    return _CACHE["c"]


def tokens(jar: str, text: str) -> list[str]:
    """The tokens ES's ``standard`` analyzer makes of ``text`` (``_analyze``)."""
    c = classes(jar)
    stream = c.analyzer(c.empty).tokenStream("text", text)
    attr = stream.addAttribute(c.term_attr)
    out = []
    stream.reset()
    while stream.incrementToken():
        out.append(attr.toString())
    stream.end()
    stream.close()
    return out


class LuceneReference:
    """Lucene's BM25 over ``docs`` ([(id, text)]) with Elasticsearch's defaults."""

    def __init__(self, jar: str, docs: Sequence[tuple[str, str]], k1: float = 1.2, b: float = 0.75):
        self.jar = jar
        c = self.c = classes(jar)
        directory = c.directory()
        cfg = c.config(c.analyzer(c.empty))
        cfg.setSimilarity(c.bm25(k1, b))
        writer = c.writer(directory, cfg)
        for doc_id, text in docs:
            doc = c.document()
            doc.add(c.string_field("id", doc_id, c.store.YES))
            doc.add(c.text_field("text", text, c.store.NO))
            writer.addDocument(doc)
        writer.commit()
        writer.close()
        self.reader = c.reader.open(directory)
        self.searcher = c.searcher(self.reader, signature="(Lorg/apache/lucene/index/IndexReader;)V")
        self.searcher.setSimilarity(c.bm25(k1, b))

    def query(self, text: str):
        """``match``: one SHOULD TermQuery per analysed token, in order; None without a token."""
        toks = tokens(self.jar, text)
        if not toks:
            return None
        c = self.c
        builder = c.boolean()
        for t in toks:
            builder.add(c.term_query(c.term("text", t)), c.occur.SHOULD)
        return builder.build()

    def search(self, text: str, k: int) -> tuple[list[str], list[float], int]:
        """Top-k ids and scores, best first, and the number of matching docs."""
        q = self.query(text)
        if q is None:
            return [], [], 0
        top = self.searcher.search(q, k)
        hits = list(top.scoreDocs)
        return ([self.searcher.doc(h.doc).get("id") for h in hits], [float(h.score) for h in hits],
                int(self.searcher.count(q)))

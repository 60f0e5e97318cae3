"""Embedded real Lucene (``backend=lucene``): BM25 through Lucene 9 in this process (pyjnius), as Elasticsearch 8's
defaults compute it; dense search, ``vectors()`` and keyword lookups as the memory backend.

Lucene is the reference for BM25: Elasticsearch's ``match`` query on a ``text`` field is Lucene's BM25 over
Lucene's standard analysis. A collection indexes each :class:`IndexDoc` text in one ``text`` field with the
``StandardAnalyzer`` without stop words (``CharArraySet.EMPTY_SET``: ES's ``standard`` analyzer), norms on and
``BM25Similarity(k1, b)`` on both the writer and the searcher, documents in insertion order (one segment after
``forceMerge(1)`` under a ``LogDocMergePolicy``, which merges adjacent segments only: Lucene doc id = row of
``ids``). A query is ES's ``match``: ``QueryBuilder(analyzer).createBooleanQuery`` (an OR of the analysed terms;
none = an empty ranking), ``IndexSearcher.search(query, k)`` (ties by doc id, Lucene's own).

The Lucene jar is Anserini's fat jar (Lucene 9.5.0, the Lucene of Elasticsearch 8.7-8.8) from the PyPI wheel of
pyserini 0.22.1: ``make install-lucene`` extracts it to ``$GEAR_CACHE/lucene/``. The JVM starts once per process
(:func:`lucene_classes`); its classpath and heap are fixed then.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from gear_repro.backends.ann import DenseSettings
from gear_repro.backends.base import IndexDoc
from gear_repro.backends.memory import InProcessBackend, InProcessBackendSettings, MemoryCollection
from gear_repro.types import Ranking
from gear_repro.utils.component import Component
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_obj
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import num

log = logging.getLogger(__name__)

INSTALL = "make install-lucene"
JAR_ENV = "GEAR_LUCENE_JAR"
MIN_JAVA = 17
FIELD = "text"  # the analysed, stored text field (norms on)
ID_FIELD = "id"  # stored only: checks a reopened index
SCHEMA_VERSION = 1
LUCENE_TARGET = "gear_repro.backends.lucene.LuceneBackend"

_JVM: dict[str, Any] = {}  # "classes", "jar", "heap_mb": the one JVM of this process
_JVM_LOCK = threading.Lock()


# -- the loader: jar, Java, JVM ----------------------------------------------------------------------------------
def find_jar(setting: str | None = None) -> Path:
    """The Lucene jar: ``backend.jar`` > ``$GEAR_LUCENE_JAR`` > ``$GEAR_CACHE/lucene/*.jar`` > an installed pyserini's
    ``resources/jars/*fatjar.jar`` (found without importing pyserini). A one-line ConfigError when none is."""
    for given, what in ((setting, "backend.jar"), (os.environ.get(JAR_ENV), f"${JAR_ENV}")):
        if given:
            p = Path(given).expanduser()
            if p.is_file():
                return p
            raise ConfigError(f"backend=lucene needs the Lucene jar: {what}={given} is not a file ({INSTALL})")
    jars = sorted((cache_dir() / "lucene").glob("*.jar"))
    if jars:
        return jars[-1]
    try:
        spec = importlib.util.find_spec("pyserini")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        jars = sorted((Path(loc) / "resources" / "jars").glob("*fatjar.jar"))
        if jars:
            return jars[-1]
    raise ConfigError(f"backend=lucene needs the Lucene jar (backend.jar, ${JAR_ENV}, $GEAR_CACHE/lucene/*.jar or "
                      f"an installed pyserini): {INSTALL}")


def java_major(version: str) -> int:
    """17 of "17.0.15", 8 of "1.8.0_392", 21 of "21"."""
    parts = [int(x) for x in re.findall(r"\d+", version)[:2]] or [0]
    return parts[1] if parts[0] == 1 and len(parts) > 1 else parts[0]


def find_java_home() -> Path:
    """``$JAVA_HOME``, else the home of ``java`` on PATH (set as ``$JAVA_HOME`` for pyjnius); a one-line ConfigError
    when there is none, it has no JVM library or its ``release`` file names a Java older than 17."""
    env = os.environ.get("JAVA_HOME")
    if env:
        home = Path(env).expanduser()
    else:
        java = shutil.which("java")
        if java is None:
            raise ConfigError(f"backend=lucene needs Java {MIN_JAVA}+ (no java on PATH, JAVA_HOME unset): {INSTALL}")
        home = Path(os.path.realpath(java)).parent.parent
    if not any(home.glob("lib/server/libjvm.*")) and not any(home.glob("jre/lib/*/server/libjvm.*")):
        raise ConfigError(f"backend=lucene needs Java {MIN_JAVA}+ (no JVM library under {home}): {INSTALL}")
    release = home / "release"
    if release.is_file():
        m = re.search(r'^JAVA_VERSION="?([^"\n]+)', release.read_text(errors="replace"), re.M)
        if m and java_major(m.group(1)) < MIN_JAVA:
            raise ConfigError(f"backend=lucene needs Java {MIN_JAVA}+ (found Java {m.group(1)} at {home}): {INSTALL}")
    if not env:
        os.environ["JAVA_HOME"] = str(home)
    return home


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300]


def lucene_classes(jar: str | None = None, heap_mb: int = 1024) -> SimpleNamespace:
    """The Lucene classes of this process's JVM, starting it on first call with ``jar`` on the classpath and
    ``-Xmx<heap_mb>m`` (:func:`find_jar`, :func:`find_java_home`). Later calls reuse it; one asking for another
    jar or heap is told (a warning) that the running JVM's stay. A JVM already started by other code serves when
    Lucene is on its classpath."""
    with _JVM_LOCK:
        if "classes" in _JVM:
            if (jar is not None and Path(jar) != _JVM["jar"]) or heap_mb != _JVM["heap_mb"]:
                log.warning("backend=lucene: the JVM runs with %s, -Xmx%sm already (one JVM a process); "
                            "backend.jar / backend.heap_mb of a later backend are not applied", _JVM["jar"],
                            _JVM["heap_mb"])
            return _JVM["classes"]
        path = find_jar(jar)
        find_java_home()
        try:
            import jnius_config
        except ImportError:
            raise ConfigError(f"backend=lucene needs pyjnius (pip install '.[lucene]'): {INSTALL}") from None
        if not jnius_config.vm_running:
            jnius_config.add_options(f"-Xmx{heap_mb}m")
            jnius_config.add_classpath(str(path))
        try:
            import jnius
        except Exception as e:  # noqa: BLE001  (pyjnius raises plain Exceptions when the JVM cannot start)
            raise ConfigError(f"backend=lucene could not start the JVM (JAVA_HOME={os.environ.get('JAVA_HOME')}): "
                              f"{_one_line(e)}; {INSTALL}") from None
        try:
            classes = _load_classes(jnius.autoclass)
        except jnius.JavaException as e:
            raise ConfigError(f"backend=lucene: the running JVM has no Lucene 9 on its classpath "
                              f"({_one_line(e)}): start it with {path}") from None
        _JVM.update(classes=classes, jar=path, heap_mb=heap_mb)
        log.info("backend=lucene: Lucene %s from %s", classes.Version.LATEST.toString(), path)
        return classes


def _load_classes(autoclass) -> SimpleNamespace:
    names = {
        "Version": "org.apache.lucene.util.Version",
        "StandardAnalyzer": "org.apache.lucene.analysis.standard.StandardAnalyzer",
        "CharArraySet": "org.apache.lucene.analysis.CharArraySet",
        "BM25Similarity": "org.apache.lucene.search.similarities.BM25Similarity",
        "IndexWriterConfig": "org.apache.lucene.index.IndexWriterConfig",
        "OpenMode": "org.apache.lucene.index.IndexWriterConfig$OpenMode",
        "IndexWriter": "org.apache.lucene.index.IndexWriter",
        "LogDocMergePolicy": "org.apache.lucene.index.LogDocMergePolicy",
        "DirectoryReader": "org.apache.lucene.index.DirectoryReader",
        "Document": "org.apache.lucene.document.Document",
        "TextField": "org.apache.lucene.document.TextField",
        "StoredField": "org.apache.lucene.document.StoredField",
        "Store": "org.apache.lucene.document.Field$Store",
        "FSDirectory": "org.apache.lucene.store.FSDirectory",
        "ByteBuffersDirectory": "org.apache.lucene.store.ByteBuffersDirectory",
        "IndexSearcher": "org.apache.lucene.search.IndexSearcher",
        "QueryBuilder": "org.apache.lucene.util.QueryBuilder",
        "File": "java.io.File",
    }
    return SimpleNamespace(**{k: autoclass(v) for k, v in names.items()})


@lru_cache(maxsize=4)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def jar_identity(path: Path) -> dict[str, Any]:
    """Name, size and sha256 of the jar (the sha256 is computed once per process: ~0.3 s for 145 MB)."""
    st = path.stat()
    return {"name": path.name, "size": st.st_size, "sha256": _sha256(str(path), st.st_size, st.st_mtime_ns)}


def jar_fingerprint(setting: str | None = None) -> dict[str, Any]:
    """What a run's fingerprint holds of the jar that will rank (:func:`find_jar`, no JVM): name and size."""
    path = find_jar(setting)
    return {"name": path.name, "size": path.stat().st_size}


# -- collections --------------------------------------------------------------------------------------------------
class LuceneIndex:
    """One collection's Lucene index, open for search: reader, searcher (BM25Similarity(k1, b)), query builder."""

    def __init__(self, lucene: SimpleNamespace, directory: Any, k1: float, b: float):
        self.lucene = lucene
        self.directory = directory
        self.reader = lucene.DirectoryReader.open(directory)
        # the IndexReader constructor (pyjnius would pick IndexReaderContext's for a DirectoryReader)
        self.searcher = lucene.IndexSearcher(self.reader, signature="(Lorg/apache/lucene/index/IndexReader;)V")
        self.searcher.setSimilarity(lucene.BM25Similarity(k1, b))
        self.analyzer = analyzer(lucene)
        self.builder = lucene.QueryBuilder(self.analyzer)

    def check(self, ids: Sequence[str]) -> None:
        """ValueError when the index is not the one segment of ``ids`` in order (a damaged or foreign cache entry)."""
        r = self.reader
        if r.maxDoc() != len(ids) or r.numDocs() != len(ids) or r.leaves().size() != 1:
            raise ValueError(f"{r.maxDoc()} docs in {r.leaves().size()} segments, expected {len(ids)} in 1")
        for d in {0, len(ids) // 2, len(ids) - 1}:
            got = self.searcher.doc(d).get(ID_FIELD)
            if got != ids[d]:
                raise ValueError(f"doc {d} is '{got}', expected '{ids[d]}'")

    def query(self, text: str) -> Any:
        """ES's ``match`` query on the text field: the OR of the analysed terms; None without a token."""
        return self.builder.createBooleanQuery(FIELD, text)

    def close(self) -> None:
        self.reader.close()
        self.directory.close()


def analyzer(lucene: SimpleNamespace) -> Any:
    """Elasticsearch's ``standard`` analyzer: Lucene's StandardAnalyzer without stop words."""
    return lucene.StandardAnalyzer(lucene.CharArraySet.EMPTY_SET)


def write_index(lucene: SimpleNamespace, directory: Any, docs: Sequence[IndexDoc], k1: float, b: float,
                ram_buffer_mb: float = 64.0) -> None:
    """Index ``docs`` into the empty ``directory``: one segment, doc id = position in ``docs``."""
    cfg = lucene.IndexWriterConfig(analyzer(lucene))
    cfg.setSimilarity(lucene.BM25Similarity(k1, b))
    cfg.setMergePolicy(lucene.LogDocMergePolicy())  # merges adjacent segments only: insertion order kept
    cfg.setOpenMode(lucene.OpenMode.CREATE)
    cfg.setRAMBufferSizeMB(ram_buffer_mb)
    writer = lucene.IndexWriter(directory, cfg)
    try:
        store, TextField, StoredField, Document = lucene.Store.YES, lucene.TextField, lucene.StoredField, lucene.Document
        for d in docs:  # one thread: segments are flushed in insertion order
            doc = Document()
            doc.add(StoredField(ID_FIELD, d.id))
            doc.add(TextField(FIELD, d.text, store))
            writer.addDocument(doc)
        writer.forceMerge(1)
        writer.commit()
    finally:
        writer.close()


class LuceneCollection(MemoryCollection):
    """A :class:`MemoryCollection` whose BM25 is real Lucene (:mod:`gear_repro.backends.lucene`): ``bm25`` and
    ``bm25_scores`` search the collection's Lucene index, cached under
    ``$GEAR_CACHE/indexes/lucene-<name>-<content hash + settings>``; dense search, ``vectors()`` and ``lookup`` are
    the memory backend's."""

    def __init__(self, name: str, docs: Sequence[IndexDoc], embedder=None, *, lucene: SimpleNamespace,
                 k1: float = 1.2, b: float = 0.75, dtype: str = "float32", cache: bool = True,
                 dense: DenseSettings | None = None, ram_buffer_mb: float = 64.0):
        super().__init__(name, docs, embedder, k1=k1, b=b, dtype=dtype, cache=cache, dense=dense)
        self.lucene = lucene
        self.lucene_version = lucene.Version.LATEST.toString()
        self.bm25_params = {"k1": k1, "b": b, "engine": "lucene", "lucene": self.lucene_version,
                            "analyzer": "standard"}
        self.ram_buffer_mb = ram_buffer_mb
        self._index: LuceneIndex | None = None
        self._index_lock = threading.Lock()

    @property
    def index_path(self) -> Path:
        key = hash_obj({"docs": self.content_hash, **self.bm25_params, "v": SCHEMA_VERSION})
        return cache_dir() / "indexes" / f"lucene-{self.name}-{key}"

    def _open(self, path: Path) -> LuceneIndex:
        L, p = self.lucene, self.bm25_params
        index = LuceneIndex(L, L.FSDirectory.open(L.File(str(path)).toPath()), p["k1"], p["b"])
        try:
            index.check(self._ids)
        except BaseException:
            index.close()
            raise
        return index

    def _bm25_index(self) -> LuceneIndex:  # type: ignore[override]
        with self._index_lock:
            if self._index is None:
                self._index = self._build_or_open()
            return self._index

    def _build_or_open(self) -> LuceneIndex:
        L, p = self.lucene, self.bm25_params
        if not self.cache:
            directory = L.ByteBuffersDirectory()
            write_index(L, directory, self._docs, p["k1"], p["b"], self.ram_buffer_mb)
            return LuceneIndex(L, directory, p["k1"], p["b"])
        path = self.index_path
        if path.exists():
            try:
                return self._open(path)
            except Exception as e:  # noqa: BLE001  (a JavaException or the check's ValueError: rebuild)
                log.warning("damaged Lucene index %s (%s): removed, rebuilding it", path, _one_line(e))
                shutil.rmtree(path, ignore_errors=True)
        # concurrent runs may build the same index: each writes its own temp directory and renames it into place;
        # a loser of the race drops its copy (same content hash)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=path.name + ".tmp"))
        try:
            directory = L.FSDirectory.open(L.File(str(tmp)).toPath())
            try:
                write_index(L, directory, self._docs, p["k1"], p["b"], self.ram_buffer_mb)
            finally:
                directory.close()
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            os.rename(tmp, path)
        except OSError:  # the index appeared meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
        return self._open(path)

    def bm25_scores(self, queries: Sequence[str]) -> list[np.ndarray | None]:
        """Full Lucene BM25 score vector per query (rows aligned with ``ids``, 0 where a doc does not match); None
        for a query with no indexed term. For in-process filtered search (GRIEVER's entity and novelty filters)."""
        index = self._bm25_index()
        out: list[np.ndarray | None] = []
        for text in queries:
            q = index.query(text)
            hits = index.searcher.count(q) if q is not None else 0
            if hits == 0:
                out.append(None)
                continue
            row = np.zeros(len(self._ids), np.float32)
            for sd in index.searcher.search(q, hits).scoreDocs:
                row[sd.doc] = sd.score
            out.append(row)
        return out

    def bm25(self, queries: Sequence[str], k: int) -> list[Ranking]:
        k_eff = min(k, len(self._ids))
        if k_eff <= 0 or not queries:
            return [Ranking() for _ in queries]
        index = self._bm25_index()
        out: list[Ranking] = []
        for text in queries:
            q = index.query(text)
            if q is None:
                out.append(Ranking())
                continue
            hits = index.searcher.search(q, k_eff).scoreDocs
            out.append(Ranking([self._ids[sd.doc] for sd in hits], [float(sd.score) for sd in hits]))
        return out

    def analyze(self, text: str) -> list[str]:
        """The tokens Lucene indexes for ``text`` (ES's ``_analyze`` with the standard analyzer)."""
        from jnius import find_javaclass

        ts = analyzer(self.lucene).tokenStream(FIELD, text)
        term = ts.addAttribute(find_javaclass("org.apache.lucene.analysis.tokenattributes.CharTermAttribute"))
        out = []
        try:
            ts.reset()
            while ts.incrementToken():
                out.append(term.toString())
            ts.end()
        finally:
            ts.close()
        return out


# -- the backend --------------------------------------------------------------------------------------------------
@dataclass
class LuceneBackendSettings(InProcessBackendSettings):
    """``backend=lucene``: the schema and :class:`LuceneBackend`'s settings (each field's default declared here or
    in :class:`InProcessBackendSettings`; ``bm25`` is BM25Similarity's k1 and b)."""

    _target_: str = LUCENE_TARGET
    # null = found: $GEAR_LUCENE_JAR, else $GEAR_CACHE/lucene/*.jar (make install-lucene), else an installed
    # pyserini's resources/jars/*fatjar.jar
    jar: str | None = None
    heap_mb: int = num(1024, ge=64)  # the JVM's -Xmx in MB (one JVM a process: the first lucene backend's value holds)
    ram_buffer_mb: float = num(64.0, gt=0)  # IndexWriter's RAM buffer in MB while indexing (no effect on scores)


class LuceneBackend(InProcessBackend):
    """Factory for :class:`LuceneCollection` (``configs/backend/lucene.yaml``); ``settings, **given``:
    :class:`LuceneBackendSettings`. Finds the jar and Java and starts the JVM when built, so a missing one is a
    one-line ConfigError before any work."""

    name = "lucene"
    settings_type = LuceneBackendSettings
    settings: LuceneBackendSettings

    def __init__(self, settings: LuceneBackendSettings | None = None, **given: Any):
        super().__init__(settings, **given)
        self.lucene = lucene_classes(self.settings.jar, self.settings.heap_mb)
        self.jar: Path = _JVM["jar"]
        self.version = self.lucene.Version.LATEST.toString()

    def open_collection(self, name: str, docs: Sequence[IndexDoc], embedder=None) -> LuceneCollection:
        return LuceneCollection(name, docs, embedder, lucene=self.lucene, dtype=self.dense_dtype, cache=self.cache,
                                dense=self.dense, ram_buffer_mb=self.settings.ram_buffer_mb, **self.bm25_params)

    def describe(self) -> dict:
        shared = super().describe()
        return {"name": self.name, "lucene": self.version, "jar": jar_identity(self.jar), **shared,
                "bm25": {**self.bm25_params, "analyzer": "standard"}}

# the registry's declaration (gear_repro/registry.py); Resources builds the backend from its node
COMPONENTS = (Component("backend", "lucene_schema", LuceneBackendSettings, LuceneBackendSettings._target_),)

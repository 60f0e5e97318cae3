"""Typed configs (gear_repro/config.py) and the paper presets (configs/experiment/*.yaml).

As lightning-hydra-template's test_sweeps.py: every preset is composed with every combination of its sweep
parameters, and (slow) each combination runs end to end on 2 questions of the bundled sample with BM25 and
all-MiniLM-L6-v2 and a scripted stand-in LLM (empty replies: nothing parsed, every step degrades as
documented), so a preset that no longer composes or runs fails here.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gear_repro import config as C
from gear_repro.utils.paths import config_dir

EXPERIMENTS = sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))
QUICK = ["retriever=bm25", "embedder=minilm", "dataset.limit=2", "run.progress=false",
         "embedder.show_progress=false", "beam.scorer=mean"]


def _compose(overrides: list[str], hydra: bool = False):
    C.register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=hydra)


def _sweep_runs(experiment: str, bm25_only: bool = False) -> list[list[str]]:
    """Override lists, one per combination of the preset's sweep parameters (``bm25_only``: the retriever axis
    reduced to BM25, for the 2-question runs)."""
    cfg = _compose([f"experiment={experiment}"], hydra=True)
    node = cfg.hydra.sweeper.get("params")
    params = OmegaConf.to_container(node) if node is not None else {}
    axes = [[f"{k}={v.strip()}" for v in str(vals).split(",")
             if not (bm25_only and k == "retriever" and v.strip() != "bm25")] for k, vals in sorted(params.items())]
    return [[f"experiment={experiment}", *combo] for combo in itertools.product(*axes)]


ALL_RUNS = [run for e in EXPERIMENTS for run in _sweep_runs(e)]
# the GEAR paper's presets run end to end here; the baseline/GRIEVER/T²RAG presets are run by their own tests
GEAR_PRESETS = ["fig2_rounds", "table12_density", "table2_single_step", "table3_qa", "table4_diversity",
                "table9_beam_rounds"]
QUICK_RUNS = [run for e in GEAR_PRESETS for run in _sweep_runs(e, bm25_only=True)]


def test_every_preset_is_listed():
    assert set(GEAR_PRESETS) <= set(EXPERIMENTS)
    assert len(QUICK_RUNS) == 2 + 2 + 3 + 2 + 2 + 3


def _typed_and_valid(cfg) -> None:
    """Every group node of ``cfg`` went through its schema (its type is one) and the config passes the start-up
    validation (``config.validate``: keys, choices, ranges, nested nodes, run-level rules)."""
    for group, schemas in C.GROUP_SCHEMAS.items():
        if cfg.get(group) is not None:
            assert OmegaConf.get_type(cfg, group) in schemas.values(), group
    for node, schema in C.NODE_SCHEMAS.items():
        assert OmegaConf.get_type(cfg, node) is schema
    C.validate(cfg)


@pytest.mark.parametrize("overrides", ALL_RUNS, ids=lambda o: " ".join(o))
def test_presets_compose_with_typed_groups(overrides):
    cfg = _compose([*overrides, *QUICK[1:]])
    assert cfg.optimized_metric == "recall@15"
    _typed_and_valid(cfg)


GROUP_DIRS = sorted(p.name for p in config_dir().iterdir() if p.is_dir() and p.name not in ("experiment", "hydra"))
GROUP_OPTIONS = [(g, p.stem) for g in GROUP_DIRS for p in sorted((config_dir() / g).glob("*.yaml"))]
PLACED_BY = {"hipporag": ["agent=hipporag"]}  # a group an agent's defaults list places (at top-level `hipporag`)


def test_every_config_group_has_schemas():
    assert set(GROUP_DIRS) == set(C.GROUP_SCHEMAS)
    assert len(GROUP_OPTIONS) > 30


@pytest.mark.parametrize("group, option", GROUP_OPTIONS, ids=lambda x: str(x))
def test_every_group_option_composes_through_its_schema_and_validates(group, option):
    cfg = _compose([*PLACED_BY.get(group, []), f"{group}={option}"])
    assert cfg[group] is not None
    _typed_and_valid(cfg)


@pytest.mark.parametrize("override, key, bad", [
    ("agent=gear", "agent.query_for_beam", "sometimes"),
    ("expansion=naive", "expansion.fusion_order", "sideways"),
    ("expansion=sync", "expansion.on_no_proximal", "never"),
    ("agent=single", "graph.hub_policy", "nope"),
    ("agent=single", "beam.exists", "x"),
    ("agent=single", "dataset.subset", "random"),
    ("agent=single", "qa_reader.mode", "oracle"),
])
def test_bad_choice_fails_at_composition(override, key, bad):
    with pytest.raises(Exception) as e:
        _compose([override, f"{key}={bad}"])
    chain, err = [], e.value
    while err is not None:
        chain.append(str(err))
        err = err.__cause__
    assert any(f"Invalid value '{bad}'" in m and key in m for m in chain)


@pytest.mark.parametrize("key", ["agent.typo", "llm.modle", "graph.maxdegree", "run.kss", "expansion.fusion"])
def test_misspelt_key_fails_at_composition(key):
    with pytest.raises(Exception, match="Could not override"):
        _compose(["agent=gear", f"{key}=1"])


def test_beam_config_is_the_beam_schema():
    from gear_repro.methods.gear.beam_search import BeamConfig, Exists
    from gear_repro.utils.errors import ConfigError

    assert C.GROUP_SCHEMAS["beam"] == {"beam_schema": BeamConfig}  # one declaration
    assert BeamConfig(exists="path").exists is Exists.path  # built directly: the same Enum and range checks
    with pytest.raises(ConfigError, match=r"beam\.exists must be one of \['previous_step', 'path', 'none'\]"):
        BeamConfig(exists="nowhere")
    with pytest.raises(ConfigError, match=r"beam\.width must be >= 1 \(got 0\)"):
        BeamConfig(width=0)


def test_choice_names_the_setting():
    from gear_repro.methods.gear.expansion import FusionOrder
    from gear_repro.utils.errors import ConfigError

    assert C.choice(FusionOrder, "base_first", "x") == "base_first"
    with pytest.raises(ConfigError, match=r"expansion.fusion_order must be one of \['base_first', 'expanded_first'\]"):
        C.choice(FusionOrder, "sideways", "expansion.fusion_order")


@pytest.mark.slow
@pytest.mark.parametrize("overrides", QUICK_RUNS, ids=lambda o: " ".join(o))
def test_presets_run_on_two_questions(overrides, tmp_path: Path):
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner
    from gear_repro.utils.io import iter_jsonl
    from tests.helpers.doubles import ScriptedLLM

    cfg = _compose([*QUICK[:1], *overrides, *QUICK[1:]])
    res = Resources(cfg, llm=ScriptedLLM({}))  # every reply empty: no triples, not answerable, empty answer
    metrics = Runner(cfg, tmp_path, resources=res).run()
    preds = [rec for _, rec in iter_jsonl(tmp_path / "predictions.jsonl")]
    assert metrics["n_questions"] == len(preds) == 2 and not any("error" in p for p in preds)
    assert all(len(p["rankings"]["final"]) >= 10 for p in preds)
    assert 0 <= metrics[cfg.optimized_metric] <= 100


@pytest.mark.parametrize("overrides, label", [
    (["beam=default"], "w/ diversity"), (["beam=no_diversity"], "w/o diversity"),
    (["beam=default", "beam.diversity=false"], "w/o diversity"),  # was "w/ diversity" beside the paper's (probe 1.7)
])
def test_table4_label_follows_beam_diversity(overrides, label):
    cfg = _compose(["experiment=table4_diversity", *overrides])
    assert OmegaConf.to_container(cfg, resolve=True)["report"]["method"] == label


@pytest.mark.parametrize("preset, overrides, label", [
    ("table4_diversity", [], "w/ diversity"),
    ("table4_diversity", ["retriever=bm25", "expansion=naive"], "w/ diversity on BM25 + NaiveGE"),
    ("table9_beam_rounds", [], "GEAR"),
    ("table9_beam_rounds", ["retriever=bm25", "expansion=none"], "GEAR on BM25 (no expansion)"),
    # the preset's own axes are named by its label; any other paper setting the run differs in is added to it
    ("table4_diversity", ["beam=no_diversity"], "w/o diversity"),
    ("table4_diversity", ["beam.scorer=fast"], "w/ diversity (fast scorer)"),
    ("table9_beam_rounds", ["beam.length=4"], "GEAR"),
    ("table9_beam_rounds", ["agent.passage_link=false"], "GEAR (no passageLink)"),
    # one base k for every rank is not Table 4's matched-k protocol; GEAR's rounds take agent.base_k anyway
    ("table4_diversity", ["run.matched_k=false"], "w/ diversity (base k = 15)"),
    ("table4_diversity", ["beam=no_diversity", "run.matched_k=false", "run.fixed_k=20"], "w/o diversity (base k = 20)"),
    ("table9_beam_rounds", ["run.matched_k=false"], "GEAR"),
])
def test_a_preset_row_on_another_base_is_not_the_papers_row(preset, overrides, label):
    """Probe 1.7: BM25 + NaiveGE under table4_diversity was "w/ diversity" beside the paper's Hybrid + SyncGE cell,
    GEAR on BM25 without SyncGE was "GEAR" in Table 9; a preset row with another beam scorer or without passageLink
    kept the preset's name beside the paper's cell."""
    from gear_repro.reporting.paper import paper_value
    from gear_repro.reporting.runs import RunResult

    cfg = OmegaConf.to_container(_compose([f"experiment={preset}", *overrides]), resolve=True)
    run = RunResult(Path("run"), cfg, {})
    assert run.method == label
    table, setting = ("Table 4", "Hybrid + SyncGE, gpt-4o-mini") if preset == "table4_diversity" else (
        "Table 9", "beam length 2, max iterations 4")
    off_paper = any(not o.startswith(("beam=", "beam.length=")) for o in overrides) and label != "GEAR"
    assert (paper_value(table, run.method, "MuSiQue", "R@5", setting=setting) is None) == off_paper


def test_help_lists_only_the_users_choices(tmp_path: Path) -> None:
    """`gear-repro --help` listed the schemas among the choices (`agent: gear, gear_schema, ...`, 21 of them, and a
    `schema: extraction, graph, report, run` group): the schemas now sit at the ConfigStore's root, in no group,
    and still type every option (a wrong choice and a misspelt key fail, above)."""
    from tests.helpers.cli import run_cli

    proc = run_cli(["--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    groups = proc.stdout.split("== Configuration groups ==")[1].split("== Config ==")[0]
    lines = dict(line.split(": ", 1) for line in groups.splitlines() if ": " in line)
    assert "_schema" not in proc.stdout and "schema" not in lines
    assert lines["agent"] == "gear, hipporag, hipporag_ircot, ircot, single, t2rag, t2rag_paper"
    assert lines["llm"] == "local, openai, openai_compatible, tiny"
    assert set(lines) == {*C.GROUP_SCHEMAS, "experiment"}


def test_each_schema_is_declared_beside_its_class_and_not_restated_by_its_constructor():
    """A setting is declared once: every registered schema is a settings dataclass from its component's own module
    (not config.py), and its class's constructor takes the dependencies plus ``settings``/``**given``, never a setting
    of its own with a default (two exceptions: SentenceEmbedder's positional ``model``; HippoRAG's ``encoder``, the
    encoder object the wiring builds from the setting of that name)."""
    import importlib
    import inspect
    from dataclasses import fields

    from gear_repro.utils.settings import Settings

    checked = 0
    for schemas in C.GROUP_SCHEMAS.values():
        for schema in schemas.values():
            assert schema.__module__ != "gear_repro.config", schema
            target = next((f.default for f in fields(schema) if f.name == "_target_"), None)
            if target is None:
                continue
            module, name = target.rsplit(".", 1)
            cls = getattr(importlib.import_module(module), name)
            assert issubclass(schema, Settings), schema
            params = set(inspect.signature(cls.__init__).parameters) - {"model", "encoder"}
            restated = params & {f.name for f in fields(schema)} - {"_target_"}
            assert not restated, f"{cls.__name__}.__init__ restates {sorted(restated)} of {schema.__name__}"
            assert "given" in params, cls
            checked += 1
    assert checked == 20


def test_a_directly_built_component_checks_the_declared_range_and_describes_every_setting():
    from gear_repro.methods.gear.agent import GearAgentSettings
    from gear_repro.utils.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^agent\.base_k must be >= 1 \(got 0\)$"):
        GearAgentSettings(max_rounds=2, base_k=0)
    with pytest.raises(ConfigError, match=r"^agent\.max_rounds must be set"):
        GearAgentSettings()
    with pytest.raises(ConfigError, match=r"agent\.base_kk is not a setting of agent \(GearAgent; its settings: "):
        GearAgentSettings.of(None, "GearAgent", max_rounds=2, base_kk=3)
    s = GearAgentSettings.of(None, "GearAgent", max_rounds=2, query_for_base="original")
    assert s.query_for_base == "original" and s.base_k == 10
    assert list(s.asdict())[:3] == ["name", "base_k", "max_rounds"] and len(s.asdict()) == 19

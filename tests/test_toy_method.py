"""A method added from outside the package: its folder (class, settings, report hooks, declaration), its YAML in a
config folder on Hydra's search path and one registry registration run it through the CLI, the API and the report
(a table row, the explorer's question view, the LLM estimate), with nothing of gear_repro edited."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import gear_repro
from gear_repro.utils.errors import ConfigError
from tests.helpers.cli import run_cli, toy_args
from tests.helpers.doubles import ScriptedLLM
from tests.helpers.toy_method import SPEC, registered, write_toy_method


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    pkg, conf = write_toy_method(tmp_path / "toy_method")
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    yield pkg, conf
    for name in [m for m in sys.modules if m == "toy_method" or m.startswith("toy_method.")]:
        del sys.modules[name]


def test_a_toy_method_runs_through_the_cli_the_api_and_the_report(toy, toy_dir: Path, tmp_path: Path):
    pkg, conf = toy
    args = toy_args(toy_dir, "agent=toy", f"hydra.searchpath=[file://{conf}]")
    code = (f"import sys; sys.path.insert(0, {str(pkg)!r}); from gear_repro.registry import register; "
            f"register({SPEC!r}); from gear_repro.cli.run import main; sys.argv[0] = 'gear-repro'; main()")
    proc = run_cli([*args, f"hydra.run.dir={tmp_path / 'cli'}"], tmp_path, code=code)
    assert proc.returncode == 0, proc.stderr
    with registered():
        cfg = gear_repro.compose(*args)
        assert cfg.agent.depth == 10 and cfg.agent.rewrite is False  # the schema's default merged under the YAML
        pipe = gear_repro.Pipeline.from_config(cfg)
        assert type(pipe.method).__name__ == "ToyMethod"
        hit = pipe.retrieve("Paris France", k=3)
        assert len(hit.ranking) == 3
        ev = pipe.evaluate(run_dir=tmp_path / "api")
        cli_metrics = json.loads((tmp_path / "cli" / "metrics.json").read_text())
        assert cli_metrics["method_class"] == ev.metrics["method_class"] == "toy_method.method.ToyMethod"
        assert cli_metrics["recall@5"] == ev.metrics["recall@5"]

        from gear_repro.reporting.html.data import Column, detail_hooks, method_detail
        from gear_repro.reporting.runs import find_runs
        from gear_repro.reporting.tables import long_table

        runs = find_runs([tmp_path / "cli"])
        table = long_table(runs)
        assert set(table["method"]) == {"Toy (BM25)"}  # its label hook names the row
        pred = json.loads((tmp_path / "cli" / "predictions.jsonl").read_text().splitlines()[0])
        shown = method_detail(Column(run=runs[0], index=0, detail_fns=detail_hooks(runs[0])), pred, depth=5)
        assert [s["title"] for s in shown["sections"]] == ["Toy"]  # its question_detail hook in the explorer

        from gear_repro.pipeline.estimate import question_estimate, question_plan

        assert question_plan(cfg) == []  # no LLM call: no estimate
        planned = gear_repro.compose(*args, "agent.rewrite=true", "qa=true")
        assert question_plan(planned) == [("qa_no_passages", 1, 0), ("qa", 1, 5)]
        ds = pipe.resources.dataset
        est = question_estimate(planned, ds.questions, ds.passages, ScriptedLLM())
        assert est is not None and "1 qa_no_passages, 1 qa" in est.output_source


def test_an_unregistered_toy_method_is_refused_naming_its_base(toy, toy_dir: Path):
    pkg, conf = toy
    with pytest.raises(ConfigError, match="does not subclass gear_repro.BaseMethod"):
        gear_repro.compose(*toy_args(toy_dir, "agent=single", "agent._target_=toy_method.method.ToyMethod",
                                     "agent.name=toy"))

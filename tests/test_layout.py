"""The package's layout (docs/ARCHITECTURE.md): imports go down the layers only, no import cycle between modules,
and a method never imports another method (they meet in the pipeline's wiring)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gear_repro"
# lowest first; a module may import its own layer or lower ones
LAYERS: list[tuple[str, ...]] = [
    ("types", "utils"),
    ("data", "prompts", "evaluation", "llm", "embedding", "backends"),
    ("core", "retrieval", "qa", "extraction", "testing"),  # testing: a stand-in LLM for examples
    # registry: the modules that declare the components, by path; config: the schemas it reads from them, each
    # imported by name when asked, so neither imports a method's code
    ("registry", "config"),
    ("methods",),
    ("pipeline", "reporting"),
    ("cli", "api"),  # api: the Python entry point beside the command line (compose shares cli.run's checks)
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Every gear_repro module -> the gear_repro modules it imports (top level and inside functions)."""
    mods = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    out: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gear_repro"):
                for alias in node.names:  # `from pkg import module` imports the module
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if sub in mods else node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("gear_repro"))
        out[name] = {d for d in deps if d in mods and d != name}
    return out


def layer(module: str) -> int:
    if module.endswith(".__main__"):  # ``python -m gear_repro.<package>``: an entry point, as cli/
        return len(LAYERS) - 1
    top = module.split(".")[1] if module.count(".") else ""
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"{module} is in no layer of tests/test_layout.py")


# the methods layer's shared contracts, which every method imports: what a method returns and how the report shows it
METHOD_CONTRACTS = ("base", "report_contract")


def method_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "methods" and parts[2] not in METHOD_CONTRACTS else None


def test_imports_go_down_the_layers() -> None:
    up = [f"{m} -> {d}" for m, deps in imports().items() if m != "gear_repro" for d in deps
          if d != "gear_repro" and layer(d) > layer(m)]
    assert up == []


def test_methods_do_not_import_each_other() -> None:
    across = [f"{m} -> {d}" for m, deps in imports().items() for d in deps
              if method_of(m) and method_of(d) and method_of(m) != method_of(d)]
    assert across == []


def test_the_report_contract_is_a_leaf() -> None:
    """``ReportHooks`` and its helpers import nothing of the methods layer (only the metrics below it), so the methods
    and ``reporting/`` share them without importing a method's code (they lived in methods/base.py beside the
    pipeline's protocols)."""
    assert imports()["gear_repro.methods.report_contract"] == {"gear_repro.evaluation.metrics"}
    assert not any(d == "gear_repro.methods.base" for d in imports()["gear_repro.reporting.runs"])


def test_no_import_cycle() -> None:
    graph = imports()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep):], dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_reporting_holds_no_method_name() -> None:
    """reporting/ reads a method through its report hooks only (label, stages, summaries, walk-through): no method's
    class, config name or expansion label appears in its code. ("GEAR" is also the paper the report lays out:
    reporting/paper.py's DEFAULT_PAPER, so the 4-letter names are not searched.)"""
    import re

    from gear_repro.methods import report_hooks

    hooks = report_hooks()
    names = {t.rsplit(".", 1)[-1] for h in hooks for t in h.targets} | {n for h in hooks for n in h.names}
    names |= {h.expansion_label for h in hooks if h.expansion_label}
    names = {n for n in names if len(n) > 4} - {"single"}  # an English word too ("single-step runs")
    assert {"SyncGE", "HippoRAGMethod", "hipporag", "ircot", "griever", "t2rag"} <= names
    hits = [f"{p.name}: {n}" for p in sorted((PACKAGE / "reporting").glob("*.py")) for n in sorted(names)
            if re.search(rf"\b{re.escape(n)}\b", p.read_text(encoding="utf-8"), re.IGNORECASE)]
    assert hits == []


# the method packages a single-step BM25 run neither runs nor validates (its expansion and beam settings are GEAR's)
OTHER_METHODS = ("gear_repro.methods.hipporag", "gear_repro.methods.griever", "gear_repro.methods.t2rag",
                 "gear_repro.methods.ircot", "gear_repro.methods.gear.agent")


def loaded_methods(code: str) -> list[str]:
    """The ``gear_repro.methods`` modules a fresh interpreter has loaded after running ``code``."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\n"
                          "print('\\n'.join(m for m in sys.modules if m.startswith('gear_repro.methods')))"],
                         capture_output=True, text=True, check=True, cwd=PACKAGE.parent)
    return sorted(out.stdout.split())


def test_config_and_reporting_import_no_method(tmp_path: Path) -> None:
    """Importing the config or the report loads no method (the report's hooks are import paths, resolved when a
    run is shown), and validating a single-step BM25 config loads only the settings of the classes it names."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from gear_repro.config import register_configs
    from gear_repro.utils.paths import config_dir

    assert loaded_methods("import gear_repro.config") == []
    reporting = ("import importlib, pkgutil, gear_repro.reporting as r\n"
                 "for m in pkgutil.walk_packages(r.__path__, 'gear_repro.reporting.'): importlib.import_module(m.name)")
    assert set(loaded_methods(reporting)) <= {"gear_repro.methods", "gear_repro.methods.report_contract"}
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=["retriever=bm25", "agent=single", "expansion=none"])
    path = tmp_path / "bm25.yaml"
    OmegaConf.save(cfg, path)
    loaded = loaded_methods(f"from omegaconf import OmegaConf\nfrom gear_repro.config import validate\n"
                            f"validate(OmegaConf.load({str(path)!r}))")
    assert "gear_repro.methods.single" in loaded  # the check did read the single-step settings
    assert [m for m in loaded if m.startswith(OTHER_METHODS)] == []


METHOD_PACKAGES = ("gear", "hipporag", "griever", "t2rag", "ircot")


def test_the_runner_is_short_and_names_no_method() -> None:
    """The runner drives any method through the wiring: it imports no method package and names none, and stays
    under 400 lines (what grows goes to its own module in pipeline/)."""
    import re

    path = PACKAGE / "pipeline" / "runner.py"
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 400
    assert [d for d in imports()["gear_repro.pipeline.runner"] if method_of(d) in METHOD_PACKAGES] == []
    assert re.findall(rf"\b({'|'.join(METHOD_PACKAGES)}|hippo\w*)\b", text, re.IGNORECASE) == []

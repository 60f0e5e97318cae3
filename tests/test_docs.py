"""README.md and docs/ stay true to the repository: no machine paths or session history, every file they cite
exists, the README's Python examples run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# an absolute path of a machine where something was measured (a user's machine has none of them); /tmp is anyone's
MACHINE_PATH = re.compile(r"(?<![\w.~$}])/(?:work|root|home|Users|mnt|scratch|data|srv)/[\w.-]+")
SESSION = re.compile(r"\b[Ss]essions?\s+\d+")
# paths of other repositories a doc cites (HippoRAG's demonstrations) and units that look like paths ("docs/s")
NOT_OURS = {"data/ircot_prompts", "docs/s"}
CITED = re.compile(r"(?<![\w/.-])((?:scripts|benchmarks|examples|docs|configs|gear_repro|tests|data)/[\w./-]*\w)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_machine_paths_or_session_history(doc: Path):
    text = doc.read_text(encoding="utf-8")
    paths = [m.group(0) for m in MACHINE_PATH.finditer(text)]
    sessions = [m.group(0) for m in SESSION.finditer(text)]
    assert not paths, f"{doc.name} cites paths of a measuring machine: {paths[:5]}"
    assert not sessions, f"{doc.name} tells session history (git has it): {sessions[:5]}"


def test_the_check_finds_what_it_forbids():
    assert MACHINE_PATH.search("see `/work/runs/s21/llm/run.sh`") and SESSION.search("re-run in session 22")
    assert not MACHINE_PATH.search("--out /tmp/report, $HOME/x, ~/.cache/gear_repro, data/prepared/musique")


# development history belongs in CHANGELOG.md (not in DOCS): an issue number, a commit of ours in backticks or after
# "commit" (an upstream reference's pinned commit, "HippoRAG legacy@b144c46", is neither)
HISTORY = re.compile(r"\b[Ii]ssues? #?\d+|`[0-9a-f]{7,40}`|\bcommits? [0-9a-f]{7,40}\b|\b(?:this|earlier) release\b")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_development_history(doc: Path):
    found = [m.group(0) for m in HISTORY.finditer(doc.read_text(encoding="utf-8"))]
    assert not found, f"{doc.name} tells development history (CHANGELOG.md holds it): {found[:5]}"


def test_the_history_check_finds_what_it_forbids():
    for text in ("(issue 25, targets 3-4)", "issue 22's defaults", "ran on `1d72d5c`", "on commit 316ed2d",
                 "this release's rows"):
        assert HISTORY.search(text), text
    for text in ("HippoRAG legacy@b144c46", "`gear-passages-3f9c0a1b2c4d`", "the code of 2026-11-24", "UAX#29"):
        assert not HISTORY.search(text), text


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_cited_file_exists(doc: Path):
    """A repository path a doc cites (a script, a config, a module) is in the repository; generated folders
    (data/prepared/, outputs/) and patterns ({a,b}, *, <name>) are not files to find."""
    text = doc.read_text(encoding="utf-8")
    missing = []
    for m in CITED.finditer(text):
        path = m.group(1).rstrip(".")
        if any(c in text[m.end():m.end() + 1] for c in "{*<") or path.startswith(("data/prepared", "data/raw")):
            continue
        if re.search(r"[{}*<>]", path) or path in NOT_OURS:
            continue
        target = REPO / path
        if not (target.exists() or target.with_suffix(".py").exists() or (REPO / path.split(":")[0]).exists()):
            missing.append(path)
    assert not missing, f"{doc.name} cites files that are not in the repository: {sorted(set(missing))[:10]}"


def test_readme_reads_in_five_minutes():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert 120 <= len(lines) <= 210, len(lines)
    text = "\n".join(lines)
    for needed in ("make demo", "make test", ".ci/run", "From Python", "Like for like", "docs/results.md",
                   "scripts/reproduce_llm_rows.sh", "examples/quickstart.ipynb"):
        assert needed in text, needed


def test_readme_component_example_runs():
    """The README's own-retriever example, as printed, ranks passages."""
    import gear_repro
    from gear_repro.types import Passage

    text = (REPO / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(# mypkg/retrievers\.py\n.*?)```", text, re.S).group(1)
    assert len(code.splitlines()) <= 20
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    ps = [Passage("0", "Paris", "capital of France"), Passage("1", "Berlin Wall", "a wall")]
    r = scope["TitleRetriever"](ps, boost=2.0).retrieve("where is the berlin wall", 1)
    assert r.ids == ["1"] and r.scores == [4.0]
    assert issubclass(scope["TitleRetriever"], gear_repro.BaseRetriever)


def test_readme_component_command_runs_through_the_console_script(tmp_path: Path):
    """The README's `gear-repro ... retriever._target_=mypkg.retrievers.TitleRetriever` command, as printed, from a
    folder holding the README's mypkg/retrievers.py, through the installed console script (whose import path starts
    at its bin folder, not at the working directory)."""
    import shlex
    import subprocess
    import sys

    from tests.helpers.requirements import missing

    script = Path(sys.executable).with_name("gear-repro")
    if not script.is_file():
        missing(f"the gear-repro console script beside {sys.executable} (make install)")
    text = (REPO / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(# mypkg/retrievers\.py\n.*?)```", text, re.S).group(1)
    command = re.search(r"```bash\n(gear-repro [^\n]*mypkg\.retrievers\.TitleRetriever[^\n]*)\n```", text).group(1)
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "retrievers.py").write_text(code, encoding="utf-8")
    run = tmp_path / "run"
    args = [*shlex.split(command)[1:], "dataset.limit=3", "run.progress=false", f"hydra.run.dir={run}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "GEAR_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([str(script), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    config = (run / "config.yaml").read_text(encoding="utf-8")
    assert "_target_: mypkg.retrievers.TitleRetriever" in config and "boost: 2.0" in config
    records = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(len(r["rankings"]["final"]) >= 15 and "error" not in r for r in records)


def test_readme_python_names_exist():
    import gear_repro

    text = (REPO / "README.md").read_text(encoding="utf-8")
    for name in set(re.findall(r"gear_repro\.(\w+)\(", text)):
        assert hasattr(gear_repro, name), name

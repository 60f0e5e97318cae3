"""The HTML results explorer (``gear-repro-report --html``; docs/explorer.md), on finished runs of six methods made
with the test doubles (tests/helpers/explorer_runs.py: markup planted in a passage, a question and an error).

Fast tests read the written files as data (what the page will show, and that nothing from the data can become
markup). ``test_explorer_in_chromium`` opens the page from disk in headless Chromium (Selenium; ``make
install-browser``): overview cells against table.csv, a filter's row count against the same filter computed here
from predictions.jsonl, a question's gold marks, side by side, no network request, a screenshot.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from gear_repro.evaluation.aggregate import ranking_for_k
from gear_repro.evaluation.per_question import question_values
from gear_repro.reporting.html import DATA_GLOBAL, QUESTION_CALLBACK
from gear_repro.reporting.tables import ci_text
from tests.helpers.explorer_runs import ERROR_MESSAGE, HOSTILE_HTML, HOSTILE_TITLE, make_runs
from tests.helpers.requirements import missing

RESAMPLES = 500


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gear_repro.cli.report import main

    root = tmp_path_factory.mktemp("explorer")
    runs = make_runs(root)
    out = root / "report"
    assert main([str(runs), "--out", str(out), "--html", "--claims", "--resamples", str(RESAMPLES)]) == 0
    return out


def load_js(path: Path, prefix: str) -> object:
    """The JSON literal a data file wraps (``window.X = {...};`` or ``window.F("key", {...});``)."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith(prefix)
    if prefix.endswith("= "):
        return json.loads(text[len(prefix):].rstrip().removesuffix(";"))
    body = text[len(prefix):].rstrip().removesuffix(");")
    return json.loads("[" + body + "]")[1]


def summary(report: Path) -> dict:
    return load_js(report / "explorer" / "data.js", f"window.{DATA_GLOBAL} = ")


def question_file(report: Path, key: str) -> dict:
    return load_js(report / "explorer" / "q" / f"{key}.js", f"window.{QUESTION_CALLBACK}(")


def predictions(report: Path) -> dict[str, dict[str, dict]]:
    """{run label: {question id: record}} from the runs' predictions.jsonl (the reference the page is checked on)."""
    out = {}
    for r in summary(report)["runs"]:
        lines = Path(r["run_dir"], "predictions.jsonl").read_text(encoding="utf-8").split("\n")  # U+2028 is data
        recs = [json.loads(x) for x in lines if x.strip()]
        out[r["label"]] = {str(p["id"]): p for p in recs}
    return out


def strings(obj: object) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    return [s for x in obj for s in strings(x)] if isinstance(obj, list) else []


def cells(obj: object) -> list[dict]:
    """Every typed cell (a dict with "t") inside a detail block."""
    if isinstance(obj, dict):
        return [obj] if "t" in obj else [c for v in obj.values() for c in cells(v)]
    return [c for v in obj for c in cells(v)] if isinstance(obj, list) else []


def finds_missed(pa: dict, pb: dict, k: int) -> bool:
    """Method A has a gold passage in its top k that method B has not (an errored record finds nothing)."""
    gold = set(pa["gold_ids"])
    top = [set() if p.get("error") else set(ranking_for_k(p, k)[:k]) for p in (pa, pb)]
    return bool((gold & top[0]) - top[1])


# -- without a browser ---------------------------------------------------------------------------------------------
def test_site_is_self_contained(report: Path) -> None:
    html = (report / "index.html").read_text(encoding="utf-8")
    refs = re.findall(r'(?:src|href)="([^"#]+)"', html)
    assert sorted(refs) == ["explorer/app.css", "explorer/app.js", "explorer/data.js"]
    assert all((report / r).is_file() for r in refs)
    app = (report / "explorer" / "app.js").read_text(encoding="utf-8")
    for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "fetch(", "XMLHttpRequest"):
        assert banned not in app, banned
    urls = set(re.findall(r"https?://[^\s\"']+", app + html + (report / "explorer" / "app.css").read_text()))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace name, never requested
    listed = json.loads((report / "report_files.json").read_text())["files"]
    assert "index.html" in listed and "explorer/data.js" in listed


def test_data_files_cannot_become_markup(report: Path) -> None:
    files = [report / "explorer" / "data.js", *sorted((report / "explorer" / "q").rglob("*.js"))]
    assert len(files) == 1 + 6  # data.js + one file per question
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert "<" not in text and ">" not in text and "\u2028" not in text and "&" not in text, f
    data = summary(report)
    q0 = data["datasets"][0]["questions"][0]
    assert q0["q"].endswith(HOSTILE_HTML)  # the escapes decode to the same text
    detail = question_file(report, "d0/0")
    gold_title = detail["passages"][detail["gold"][0]][0]
    assert gold_title.endswith(HOSTILE_TITLE) and detail["passages"][detail["gold"][0]][1].endswith(HOSTILE_HTML)
    gear = data["datasets"][0]["methods"].index(next(m for m in data["datasets"][0]["methods"] if m["label"] == "GEAR"))
    assert any(HOSTILE_TITLE.strip() in x for x in strings(detail["methods"][gear]["sections"]))  # in LLM replies
    errored = [q for q in data["datasets"][0]["questions"] if q["m"][gear].get("err")]
    assert len(errored) == 1 and ERROR_MESSAGE in errored[0]["m"][gear]["err"]


def test_question_index_matches_predictions(report: Path) -> None:
    """Recall@k from the index's gold ranks (the page's rule) equals the metrics' per-question values at every k."""
    data, preds = summary(report), predictions(report)
    ds = data["datasets"][0]
    assert ds["ks"] == [5, 10, 15] and len(ds["questions"]) == 6 and len(ds["methods"]) == 6
    for j, m in enumerate(ds["methods"]):
        recs = list(preds[m["label"]].values())
        for k in (1, 3, 5, 10, 15, 40):
            want = question_values(recs, f"recall@{k}")
            for row in ds["questions"]:
                c = row["m"][j]
                ranks = c["g"].get(str(k), c["g"]["final"])
                got = 100 * sum(0 < r <= k for r in ranks) / row["ng"]
                assert got == pytest.approx(want[row["id"]]), (m["label"], k, row["id"])
        for row in ds["questions"]:
            p = preds[m["label"]][row["id"]]
            assert (row["m"][j].get("em"), row["m"][j].get("f1")) == (p.get("em"), p.get("f1"))


def test_overview_tables_are_table_csv(report: Path) -> None:
    table = pd.read_csv(report / "table.csv")
    cells = {}
    for t in summary(report)["tables"]:
        for row in t["rows"]:
            for col, cell in zip(t["columns"], row["cells"], strict=True):
                if cell is not None:
                    cells[(t["title"], row["label"], col["dataset"], col["metric"])] = cell
    assert len(cells) == len(table) > 0
    for r in table.itertuples():
        cell = cells[(r.table, r.label, r.dataset, r.metric)]
        assert (cell["ours"], cell["lo"], cell["hi"]) == (r.ours, r.ci_low, r.ci_high)
        assert cell["text"] == ci_text(r.ours, r.ci_low, r.ci_high, r.n)
        if not pd.isna(r.paper):  # 6 of the paper's 500 questions: every paper cell says so
            assert cell["paper_text"] == f"({r.paper:.1f}, {r.delta:+.1f})" and "6 of 500 questions" in cell["sample"]


def test_plot_points_are_the_tables_intervals(report: Path) -> None:
    table = pd.read_csv(report / "table.csv")
    plots = summary(report)["plots"][0]
    assert {s["label"] for s in plots["curves"]} == set(table["label"])
    for s in plots["curves"]:
        for k in (5, 10, 15):
            r = table[(table.label == s["label"]) & (table.metric == f"R@{k}")].iloc[0]
            i = s["x"].index(k)
            assert (s["mean"][i], s["lo"][i], s["hi"][i]) == pytest.approx((r.ours, r.ci_low, r.ci_high), abs=0.006)
    gear = next(s for s in plots["rounds"] if s["label"] == "GEAR")
    assert gear["x"] == [1, 2, 3, 4] and not gear["flat"]
    assert next(s for s in plots["rounds"] if s["label"] == "BM25")["flat"]
    assert {t["type"] for s in plots["types"] for t in s["types"]} == {"2hop", "3hop1", "4hop1"}
    assert {s["label"] for s in plots["tokens"]} >= {"GEAR input", "GEAR output", "IRCoT (BM25) input"}  # Fig. 4 stages


def test_each_method_shows_its_own_blocks(report: Path) -> None:
    """Per-method views come from the methods' question_detail hooks: GEAR's Table 6 rounds, SyncGE's passes,
    IRCoT's thoughts, HippoRAG's linked entities, T²RAG's triplet states; BM25 has none."""
    data = summary(report)
    labels = [m["label"] for m in data["datasets"][0]["methods"]]
    preds = predictions(report)
    for n, row in enumerate(data["datasets"][0]["questions"]):
        detail = question_file(report, f"d0/{n}")
        titles = {lab: [b["title"] for b in (m or {}).get("sections", [])] for lab, m in zip(labels, detail["methods"], strict=True)}
        gear = preds["GEAR"][row["id"]]
        if gear.get("error"):
            assert titles["GEAR"] == [] and detail["methods"][labels.index("GEAR")]["error"] == gear["error"]
        else:
            table6 = detail["methods"][labels.index("GEAR")]["sections"][0]
            assert table6["title"] == "GEAR rounds (the paper's Table 6)" and len(table6["rows"]) == len(gear["rounds"])
            assert [r[1] for r in table6["rows"]] == [r["query"] for r in gear["rounds"]]
            with_paths = [r["round"] for r in gear["rounds"]
                          if set(r["expanded"]) & {pid for b in r["beams"] for pid in b["passages"]}]
            assert [t for t in titles["GEAR"] if "beam paths" in t] == [
                f"Round {n}: beam paths per expanded passage" for n in with_paths]
        assert titles["BM25"] == []
        assert titles["BM25 + SyncGE"][:2] == ["pass k=5: sync", "pass k=5: beam paths per expanded passage"]
        assert titles["IRCoT (BM25)"] == ["IRCoT rounds: retrieve, then think"]
        assert titles["HippoRAG"][0] == "HippoRAG: query entities linked to phrase nodes (v1)"
        assert titles["T2RAG"] == ["T²RAG decomposition", "T²RAG iterations: triplet states", "T²RAG answer context"]
        shown = {i for m in detail["methods"] if m for v in (*m["rankings"].values(), m.get("qa_passages", [])) for i in v}
        shown |= {i for m in detail["methods"] if m for b in m["sections"] for x in cells(b) if x.get("t") == "passages"
                  for i in x["ids"]}
        assert shown | set(detail["gold"]) <= set(detail["passages"])  # every listed passage readable


# -- in a browser ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chromium():
    from tests.helpers.browser import browser_missing, start_chromium

    reason = browser_missing()
    if reason:
        missing(reason)
    driver = start_chromium()
    yield driver
    driver.quit()


def _select(driver, css: str, value: object) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("css selector", css)).select_by_value(str(value))


@pytest.mark.browser
def test_explorer_in_chromium(report: Path, chromium, tmp_path: Path) -> None:
    from tests.helpers.browser import wait_for

    d = chromium
    d.get((report / "index.html").as_uri() + "#overview")
    wait_for(d, "return document.documentElement.dataset.ready")
    assert d.execute_script("return performance.getEntriesByType('resource').every(e => e.name.startsWith('file:'))")
    # overview: every cell of table.csv in its row and column, as table.md writes it
    table = pd.read_csv(report / "table.csv")
    shown = d.execute_script("""return [...document.querySelectorAll('table.paper td.cell[data-metric]')].map(td =>
        [td.closest('table').id, td.dataset.label, td.dataset.dataset, td.dataset.metric, td.querySelector('.ours').textContent,
         (td.querySelector('.paperv') || {}).textContent || null])""")
    titles = list(dict.fromkeys(table["table"]))
    want = sorted([f"paper-table-{titles.index(r.table)}", r.label, r.dataset, r.metric, ci_text(r.ours, r.ci_low, r.ci_high, r.n),
                   f"({r.paper:.1f}, {r.delta:+.1f})" if not pd.isna(r.paper) else
                   f"{{paper, other setting: {r.paper_other_setting:.1f}}}" if not pd.isna(r.paper_other_setting) else None]
                  for r in table.itertuples())
    assert sorted(shown) == want
    # questions: hop type, "A finds a gold passage that B misses at k", errors and text filters vs the same in Python
    d.get((report / "index.html").as_uri() + "#questions")
    wait_for(d, "return document.getElementById('q-count')")
    data, preds = summary(report), predictions(report)
    labels = [m["label"] for m in data["datasets"][0]["methods"]]
    ids = list(preds["GEAR"])
    # the first pair and k where the filter keeps some questions but not all (GEAR vs BM25 first)
    pairs = [("GEAR", "BM25"), *((x, y) for x in labels for y in labels if x != y)]
    la, lb, k, expect = next((x, y, kk, hits) for x, y in pairs for kk in (10, 5, 15)
                             if 0 < len(hits := [q for q in ids if finds_missed(preds[x][q], preds[y][q], kk)]) < len(ids))
    a, b = labels.index(la), labels.index(lb)
    _select(d, "#f-a", a)
    _select(d, "#f-b", b)
    box = d.find_element("css selector", "#f-k")
    box.clear()
    box.send_keys(str(k))
    wait_for(d, f"return document.getElementById('f-k').value === '{k}'")
    assert int(d.find_element("css selector", "#q-count").text) == len(expect)
    assert d.execute_script("return [...document.querySelectorAll('#q-table tbody tr td:first-child')].map(td => td.textContent)") == expect
    _select(d, "#f-type", "2hop")
    expect2 = [q for q in expect if preds[la][q]["type"] == "2hop"]
    assert int(d.find_element("css selector", "#q-count").text) == len(expect2)
    d.find_element("css selector", "#f-reset").click()
    _select(d, "#f-err", "some")
    assert int(d.find_element("css selector", "#q-count").text) == sum(
        any(p[q].get("error") for p in preds.values()) for q in ids) == 1
    _select(d, "#f-err", "any")
    d.find_element("css selector", "#f-text").send_keys("<img")
    assert int(d.find_element("css selector", "#q-count").text) == 1
    d.save_screenshot(str(tmp_path / "questions.png"))
    # one question: GEAR's top 15 with its gold passages marked, side by side with BM25
    a, b = labels.index("GEAR"), labels.index("BM25")
    d.find_element("css selector", "#q-table tbody tr td:first-child a").click()
    key = wait_for(d, "return document.getElementById('view-q').dataset.loaded")
    q = ids[0]
    assert key == "d0/0" and d.find_element("css selector", "#q-text").text.startswith(preds["GEAR"][q]["question"].split(" <img")[0])
    _select(d, "#q-a", a)
    wait_for(d, f"return (document.querySelector('#panel-a') || {{dataset: {{}}}}).dataset.method === '{a}'")
    _select(d, "#q-b", b)
    wait_for(d, f"return (document.querySelector('#panel-b') || {{dataset: {{}}}}).dataset.method === '{b}'")
    for side, label in (("a", "GEAR"), ("b", "BM25")):
        rec = preds[label][q]
        top = ranking_for_k(rec, 15)[:15]
        items = d.execute_script(f"return [...document.querySelectorAll('#panel-{side} ol.topk > li')].map(li => [li.dataset.pid, li.classList.contains('gold')])")
        assert items == [[pid, pid in rec["gold_ids"]] for pid in top]
    # nothing from the data became markup; the hostile title is shown as text
    assert d.execute_script("return window.__pwned") is None
    assert d.execute_script("return document.querySelectorAll('main script, main img[src=\"x\"]').length") == 0
    assert HOSTILE_TITLE.strip() in d.find_element("css selector", "#gold-ranks").text
    assert not [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    d.save_screenshot(str(tmp_path / "question.png"))
    assert (tmp_path / "question.png").stat().st_size > 20_000

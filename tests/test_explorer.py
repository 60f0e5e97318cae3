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


# the runs' method names by run folder (tests/helpers/explorer_runs.py METHODS); their row labels add the models
# that differ from the paper's ("GEAR (hash-64, LLM ...)": reporting/runs.py model_notes)
SHORT = {"bm25": "BM25", "bm25+sync": "BM25 + SyncGE", "gear": "GEAR", "hipporag": "HippoRAG",
         "ircot": "IRCoT (BM25; stop words + stemmer analyzer)", "t2rag": "T2RAG"}


def label(report: Path, short: str) -> str:
    """The row label of the run whose method is ``short`` (SHORT)."""
    return next(r["label"] for r in summary(report)["runs"] if SHORT[Path(r["run_dir"]).name] == short)


def predictions(report: Path) -> dict[str, dict[str, dict]]:
    """{run label: {question id: record}} from the runs' predictions.jsonl (the reference the page is checked on),
    also under the method's short name (SHORT)."""
    out = {}
    for r in summary(report)["runs"]:
        lines = Path(r["run_dir"], "predictions.jsonl").read_text(encoding="utf-8").split("\n")  # U+2028 is data
        recs = [json.loads(x) for x in lines if x.strip()]
        out[r["label"]] = out[SHORT[Path(r["run_dir"]).name]] = {str(p["id"]): p for p in recs}
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
    gear = data["datasets"][0]["methods"].index(next(m for m in data["datasets"][0]["methods"] if m["label"] == label(report, "GEAR")))
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
    gear = next(s for s in plots["rounds"] if s["label"] == label(report, "GEAR"))
    assert gear["x"] == [1, 2, 3, 4] and not gear["flat"]
    assert next(s for s in plots["rounds"] if s["label"] == label(report, "BM25"))["flat"]
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
        titles |= {short: titles[label(report, short)] for short in SHORT.values()}
        gear = preds["GEAR"][row["id"]]
        if gear.get("error"):
            assert titles["GEAR"] == [] and detail["methods"][labels.index(label(report, "GEAR"))]["error"] == gear["error"]
        else:
            table6 = detail["methods"][labels.index(label(report, "GEAR"))]["sections"][0]
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
    pairs = [(label(report, "GEAR"), label(report, "BM25")), *((x, y) for x in labels for y in labels if x != y)]
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
    a, b = labels.index(label(report, "GEAR")), labels.index(label(report, "BM25"))
    d.find_element("css selector", "#q-table tbody tr td:first-child a").click()
    key = wait_for(d, "return document.getElementById('view-q').dataset.loaded")
    q = ids[0]
    assert key == "d0/0" and d.find_element("css selector", "#q-text").text.startswith(preds["GEAR"][q]["question"].split(" <img")[0])
    _select(d, "#q-a", a)
    wait_for(d, f"return (document.querySelector('#panel-a') || {{dataset: {{}}}}).dataset.method === '{a}'")
    _select(d, "#q-b", b)
    wait_for(d, f"return (document.querySelector('#panel-b') || {{dataset: {{}}}}).dataset.method === '{b}'")
    for side, short in (("a", "GEAR"), ("b", "BM25")):
        rec = preds[short][q]
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


def test_single_step_rankings_reach_save_depth(report: Path) -> None:
    """A single-step run without a k-dependent expansion saved only max(run.ks) = 15 ids although run.save_depth is
    100, so gold ranks and recall@k curves stopped at 15; it now saves the retriever's list to save_depth with the same
    top 15 (its base list), and the explorer shows gold ranks past 15."""
    preds = predictions(report)
    bm25 = list(preds["BM25"].values())
    for p in bm25:
        final = p["rankings"]["final"]
        assert 15 < len(final) <= 100 and final[:15] == p["trace"]["base"]
    data = summary(report)
    ds = data["datasets"][0]
    j = [m["label"] for m in ds["methods"]].index(label(report, "BM25"))
    ranks = [r for row in ds["questions"] for r in row["m"][j]["g"]["final"]]
    assert max(ranks) > 15
    curve = next(s for s in data["plots"][0]["curves"] if s["label"] == label(report, "BM25"))
    assert curve["x"][-1] == max(len(p["rankings"]["final"]) for p in bm25) > 15
    sync = preds["BM25 + SyncGE"]  # k-dependent: its base list stays at the matched k
    assert all(len(p["rankings"]["5"]) <= 15 for p in sync.values())


def test_question_detail_keeps_the_timeline(report: Path) -> None:
    """Each LLM call keeps its ts (the timeline's position) and a GEAR question its per-round step timings."""
    data, preds = summary(report), predictions(report)
    labels = [m["label"] for m in data["datasets"][0]["methods"]]
    gear = labels.index(label(report, "GEAR"))
    assert [m["n"] for m in data["datasets"][0]["methods"]] == [6] * 6 and data["small_n"] == 20
    for n, row in enumerate(data["datasets"][0]["questions"]):
        rec = preds["GEAR"][row["id"]]
        m = question_file(report, f"d0/{n}")["methods"][gear]
        assert [(c["stage"], c["round"], c["ts"], c["latency_s"]) for c in m["llm_calls"]] == [
            (c["stage"], c["round"], c["ts"], c["latency_s"]) for c in rec["llm_calls"]]
        assert m.get("step_timings", []) == [r["timings"] for r in rec.get("rounds") or []]


def _diffs(preds: dict, la: str, lb: str, k: int) -> dict[str, float]:
    va, vb = (question_values(list(preds[x].values()), f"recall@{k}") for x in (la, lb))
    return {q: va[q] - vb[q] for q in va if q in vb}


@pytest.mark.browser
def test_who_wins_both_directions_export_and_timeline_in_chromium(report: Path, chromium, tmp_path: Path) -> None:
    """The overview's win/tie/loss matrix against the same counts from predictions.jsonl; the pair filter in both
    directions with both counts shown; the Δ column sorted; the CSV/JSONL export of the filtered set; one GEAR
    question's timeline against its LLM call records."""
    from tests.helpers.browser import wait_for

    d = chromium
    data, preds = summary(report), predictions(report)
    labels = [m["label"] for m in data["datasets"][0]["methods"]]
    d.get((report / "index.html").as_uri() + "#overview")
    wait_for(d, "return document.documentElement.dataset.ready")
    wait_for(d, "return document.querySelector('#wtl-0 td.wtlcell')")  # drawn after the first paint
    for k in (15, 5):
        _select(d, "#wtl-metric-0", f"r{k}")
        cells = d.execute_script("return [...document.querySelectorAll('#wtl-0 td.wtlcell')].map(td => "
                                 "[+td.dataset.a, +td.dataset.b, +td.dataset.w, +td.dataset.t, +td.dataset.l])")
        assert len(cells) == len(labels) * (len(labels) - 1)
        for a, b, w, t, lo in cells:
            diffs = _diffs(preds, labels[a], labels[b], k).values()
            assert (w, t, lo) == (sum(x > 1e-9 for x in diffs), sum(abs(x) <= 1e-9 for x in diffs),
                                  sum(x < -1e-9 for x in diffs)), (labels[a], labels[b], k)
    # every paper-table cell of these 6-question runs is marked as too few questions to read as a result
    assert d.execute_script("return [...document.querySelectorAll('table.paper td.cell')].every(td => "
                            "td.classList.contains('smalln'))")
    # the pair filter, both directions: the first pair and k where both directions keep some questions
    ids = list(preds["GEAR"])
    la, lb, k, ab, ba = next((x, y, kk, p, q) for x in labels for y in labels if x != y for kk in (10, 15, 5)
                             if (p := [i for i in ids if finds_missed(preds[x][i], preds[y][i], kk)])
                             and (q := [i for i in ids if finds_missed(preds[y][i], preds[x][i], kk)]))
    a, b = labels.index(la), labels.index(lb)
    d.get((report / "index.html").as_uri() + f"#questions?a={a}&b={b}&k={k}")
    wait_for(d, "return document.getElementById('q-n-ab')")
    assert (int(d.find_element("css selector", "#q-n-ab").text), int(d.find_element("css selector", "#q-n-ba").text)) == (
        len(ab), len(ba))
    shown = "return [...document.querySelectorAll('#q-table tbody tr td:first-child')].map(td => td.textContent)"
    assert d.execute_script(shown) == ab
    _select(d, "#f-mode", "b")
    assert int(d.find_element("css selector", "#q-count").text) == len(ba) and d.execute_script(shown) == ba
    assert "mode=b" in d.execute_script("return location.hash")
    _select(d, "#f-mode", "either")
    assert d.execute_script(shown) == [i for i in ids if i in ab or i in ba]
    # every question, sorted by the per-question difference A − B (largest first; ties in question order)
    d.get((report / "index.html").as_uri() + f"#questions?a={a}&b={b}&k={k}&mode=all&sort=diff&dir=-1")
    wait_for(d, "return document.querySelector('#q-table td.diff')")
    diff = _diffs(preds, la, lb, k)
    order = sorted(ids, key=lambda q: (-diff[q], ids.index(q)))
    assert d.execute_script(shown) == order
    assert d.execute_script("return [...document.querySelectorAll('#q-table td.diff')].map(td => td.textContent)") == [
        f"{diff[q]:+.0f}" if diff[q] > 0 else f"{diff[q]:.0f}" for q in order]
    w, t, lo = (int(x) for x in d.execute_script("const e = document.getElementById('q-wtl'); return [e.dataset.w, e.dataset.t, e.dataset.l]"))
    assert (w, t, lo) == (sum(x > 0 for x in diff.values()), sum(x == 0 for x in diff.values()), sum(x < 0 for x in diff.values()))
    assert sum(int(r.get_attribute("data-count")) for r in d.find_elements("css selector", "#q-hist-svg rect")) == len(ids)
    d.save_screenshot(str(tmp_path / "questions_by_diff.png"))
    # the export: the filtered set (every page), in the shown order
    import csv
    import io

    rows = list(csv.reader(io.StringIO(d.execute_script("return window.EXPLORER_EXPORT('csv')"))))
    assert [r[0] for r in rows[1:]] == order and rows[0][-1] == f"delta A-B R@{k}"
    assert [float(r[-1]) for r in rows[1:]] == pytest.approx([diff[q] for q in order])
    jsonl = d.execute_script("return window.EXPLORER_EXPORT('jsonl')").splitlines()
    assert [json.loads(x)["id"] for x in jsonl] == order
    assert json.loads(jsonl[0])["question"] == preds["GEAR"][order[0]]["question"]
    # one GEAR question's timeline: a bar per LLM call, in start order (ts − latency), with its stage, round, latency
    gear = labels.index(label(report, "GEAR"))
    n = next(i for i, q in enumerate(ids) if not preds["GEAR"][q].get("error"))
    d.get((report / "index.html").as_uri() + f"#q?i={n}&a={gear}&b={labels.index(label(report, 'BM25'))}")
    wait_for(d, f"return document.getElementById('view-q').dataset.loaded === 'd0/{n}'")
    calls = preds["GEAR"][ids[n]]["llm_calls"]
    want = sorted(range(len(calls)), key=lambda j: (calls[j]["ts"] - calls[j]["latency_s"], j))
    got = d.execute_script("return [...document.querySelectorAll('#timeline-a g.tl-call')].map(g => "
                           "[+g.dataset.index, g.dataset.stage, g.dataset.round, +g.dataset.latency])")
    assert got == [[j, calls[j]["stage"], str(calls[j]["round"]), calls[j]["latency_s"]] for j in want]
    # side by side, each method's own view (GEAR's round table) is full width below the pair, not squeezed in it
    assert d.execute_script("return !document.querySelector('#panel-a #own-a') && !!document.querySelector('.panel.wide #own-a table')")
    assert not [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def test_prompts_and_replies_are_kept_by_default() -> None:
    """The question view's LLM calls had no prompt or reply unless a run set llm.record_prompts=true; every LLM
    config now keeps them by default (predictions.jsonl: +17 kB per SyncGE and +23 kB per GEAR question,
    docs/explorer.md), and the switch still leaves the run fingerprint alone (a resume may change it)."""
    from gear_repro.pipeline.resume import run_fingerprint
    from gear_repro.pipeline.run_folder import changes_no_result
    from tests.helpers.runs import compose_config

    for llm in ("local", "tiny", "openai", "openai_compatible"):
        assert compose_config([f"llm={llm}"]).llm.record_prompts is True, llm
    assert changes_no_result("llm.record_prompts")
    on, off = compose_config(["agent=gear"]), compose_config(["agent=gear", "llm.record_prompts=false"])
    assert run_fingerprint(on) == run_fingerprint(off)


def test_the_generated_stamp_follows_source_date_epoch(monkeypatch) -> None:
    """Two reports of the same runs are byte-identical under SOURCE_DATE_EPOCH (the explorer's stamp was the clock)."""
    from gear_repro.reporting.html import generated_at

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert generated_at() == "2023-11-14 22:13 UTC"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert generated_at().endswith(" UTC") and generated_at()[:4] >= "2026"


def test_the_explorer_pairs_only_what_compare_pairs_and_shows_the_ceiling(compose, toy_dir: Path, tmp_path: Path) -> None:
    """Three BM25 runs on the toy data: its reordered copy (the same questions by content: paired), and a copy whose
    q1 has a gold passage that is in no passage (other gold: compare() refuses it, so the explorer gives the pair no
    win/tie/loss and says why; its recall cells carry the ceiling, as table.md's do)."""
    from gear_repro.api import compare
    from gear_repro.cli.report import main
    from gear_repro.pipeline.runner import Runner
    from gear_repro.utils.errors import GearError

    lines = (toy_dir / "questions.jsonl").read_text().splitlines()
    other_gold = [json.loads(x) for x in lines]
    other_gold[0]["gold_ids"] = [*other_gold[0]["gold_ids"], "not-a-passage"]
    copies = {"reordered": "\n".join(reversed(lines)) + "\n",
              "other_gold": "".join(json.dumps(q) + "\n" for q in other_gold)}
    data = {"toy": toy_dir}
    for name, text in copies.items():
        data[name] = tmp_path / name
        data[name].mkdir()
        (data[name] / "corpus.jsonl").write_bytes((toy_dir / "corpus.jsonl").read_bytes())
        (data[name] / "questions.jsonl").write_text(text)
    runs = tmp_path / "runs"
    for name, path in data.items():
        Runner(compose([f"dataset.path={path}", "dataset.name=toy", "run.progress=false", "retriever=bm25"]),
               runs / name).run()
    with pytest.raises(GearError, match="different gold"):
        compare(runs / "toy", runs / "other_gold")
    assert main([str(runs), "--out", str(tmp_path / "report"), "--html", "--resamples", "200"]) == 0
    site = summary(tmp_path / "report")
    ds = site["datasets"][0]
    tags = [Path(site["runs"][m["run"]]["run_dir"]).name for m in ds["methods"]]
    i, j, k = (tags.index(t) for t in ("toy", "reordered", "other_gold"))
    refused = ds.get("unpaired") or {}
    assert f"{min(i, j)}/{max(i, j)}" not in refused  # a reordered copy is the same questions
    for a in (i, j):
        assert "different gold" in refused[f"{min(a, k)}/{max(a, k)}"]
    md = (tmp_path / "report" / "table.md").read_text()
    ceiling = re.search(r"≤\d+\.\d", md)
    assert ceiling
    texts = [c["text"] for t in site["tables"] for r in t["rows"] for c in r["cells"] if c]
    assert any(t.endswith(ceiling.group(0)) for t in texts)

/* gear_repro results explorer (docs/explorer.md).
 * Reads window.EXPLORER_DATA (explorer/data.js) and, on demand, one question's detail (explorer/q/<d>/<n>.js, which
 * calls window.EXPLORER_QUESTION). The DOM is built with createElement/textContent only: no text from the data is
 * ever parsed as HTML. Nothing is fetched from a network. Method-specific views are data (blocks written by each
 * method's report hooks); this file knows no method. */
"use strict";
(function () {
  const D = window.EXPLORER_DATA;
  const PAGE = 200; // question rows rendered per "show more"
  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    "#17becf", "#393b79", "#637939"];

  // -- DOM helpers -------------------------------------------------------------------------------------------
  function el(tag, props, ...kids) {
    const n = document.createElement(tag);
    setProps(n, props);
    append(n, kids);
    return n;
  }
  function setProps(n, props) {
    if (!props) return;
    for (const [k, v] of Object.entries(props)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") n.setAttribute("class", v);
      else if (k === "text") n.textContent = String(v);
      else if (k === "dataset") Object.assign(n.dataset, v);
      else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
      else n.setAttribute(k, v === true ? "" : String(v));
    }
  }
  function append(n, kids) {
    for (const c of kids.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      n.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return n;
  }
  const SVGNS = "http://www.w3.org/2000/svg"; // a namespace name, not a URL that is fetched
  function sv(tag, attrs, ...kids) {
    const n = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) n.setAttribute(k, String(v));
    append(n, kids);
    return n;
  }
  function clear(n) { while (n.firstChild) n.removeChild(n.firstChild); return n; }
  function num(x, d) {
    if (x === null || x === undefined || (typeof x === "number" && Number.isNaN(x))) return "–";
    if (typeof x === "boolean") return x ? "yes" : "no";
    if (typeof x !== "number") return String(x);
    if (d !== undefined) return x.toFixed(d);
    return Number.isInteger(x) ? String(x) : String(Math.round(x * 1000) / 1000);
  }
  function params(obj) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(obj)) if (v !== "" && v !== null && v !== undefined) p.set(k, String(v));
    return p.toString();
  }

  // -- state and routing -------------------------------------------------------------------------------------
  const S = { ds: 0, qf: null, list: null, built: {}, plotsBuilt: {} };
  function dataset() { return D.datasets[S.ds]; }
  function maxK(ds) { return ds.ks[ds.ks.length - 1]; }
  function defaultFilter(ds) {
    return { type: "", text: "", err: "any", a: -1, b: -1, k: maxK(ds), sort: "", dir: 1, page: 1 };
  }
  function readFilter(p, ds) {
    const f = defaultFilter(ds);
    if (p.has("type")) f.type = p.get("type");
    if (p.has("text")) f.text = p.get("text");
    if (p.has("err")) f.err = p.get("err");
    for (const key of ["a", "b", "k", "dir"]) if (p.has(key) && !Number.isNaN(parseInt(p.get(key), 10))) f[key] = parseInt(p.get(key), 10);
    if (p.has("sort")) f.sort = p.get("sort");
    return f;
  }
  function filterHash(f) {
    return "#questions?" + params({ ds: S.ds, type: f.type, text: f.text, err: f.err === "any" ? "" : f.err,
      a: f.a >= 0 ? f.a : "", b: f.b >= 0 ? f.b : "", k: f.k, sort: f.sort, dir: f.sort ? f.dir : "" });
  }
  function route() {
    const h = location.hash.replace(/^#/, "");
    const [view, query] = h.split("?");
    const p = new URLSearchParams(query || "");
    if (p.has("ds")) {
      const ds = parseInt(p.get("ds"), 10);
      if (ds >= 0 && ds < D.datasets.length && ds !== S.ds) { S.ds = ds; S.qf = null; S.list = null; }
    }
    const name = ["overview", "questions", "q", "plots"].includes(view) ? view : "overview";
    for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.view === name);
    for (const s of document.querySelectorAll("main > .view")) s.hidden = s.id !== "view-" + name;
    if (name === "overview") showOverview();
    else if (name === "questions") showQuestions(p);
    else if (name === "q") showQuestion(p);
    else showPlots();
    return name;
  }

  // -- overview ----------------------------------------------------------------------------------------------
  function datasetPicker(onPick) {
    if (D.datasets.length < 2) return null;
    const sel = el("select", { id: "ds-select", onchange: () => onPick(parseInt(sel.value, 10)) },
      D.datasets.map((d, i) => el("option", { value: i, text: d.name + " (" + d.questions.length + " questions)" })));
    sel.value = String(S.ds);
    return el("label", null, "dataset ", sel);
  }
  function paperTable(t, ti) {
    const byDs = [];
    for (const c of t.columns) if (!byDs.includes(c.dataset)) byDs.push(c.dataset);
    const head1 = el("tr", null, el("th", { rowspan: 2, text: "method" }),
      byDs.map((d) => el("th", { colspan: t.columns.filter((c) => c.dataset === d).length + 1, text: d })));
    const head2 = el("tr", null, byDs.map((d) => [t.columns.filter((c) => c.dataset === d).map((c) => el("th", { text: c.metric })),
      el("th", { text: "errors", title: "questions that failed (scored as misses)" })]));
    const notes = [];
    const body = t.rows.map((r) => el("tr", { dataset: { label: r.label } }, el("th", { text: r.label }),
      byDs.map((d) => {
        const cells = [];
        let errors = null;
        t.columns.forEach((c, j) => {
          if (c.dataset !== d) return;
          const x = r.cells[j];
          if (!x) { cells.push(el("td", { class: "cell muted", text: "–" })); return; }
          errors = x.errors;
          const td = el("td", { class: "cell", dataset: { dataset: c.dataset, metric: c.metric, label: r.label } });
          append(td, [el("span", { class: "ours", text: x.text })]);
          if (x.paper_text) {
            const other = x.delta === null || x.delta === undefined;  // the paper's number on another setting: no Δ
            append(td, [" ", el("span", { class: "paperv " + (other ? "other" : x.delta >= 0 ? "pos" : "neg"), text: x.paper_text,
              title: "paper " + num(x.paper, 1) + (x.source ? " (" + x.source + ")" : "") +
                (other ? ", measured on another setting (see the note): no Δ" : ", Δ = ours − paper") })]);
          }
          if (x.sample) {
            let i = notes.indexOf(x.sample);
            if (i < 0) { notes.push(x.sample); i = notes.length - 1; }
            append(td, [el("sup", { class: "sample", title: x.sample, text: "†" + (i + 1) })]);
          }
          cells.push(td);
        });
        cells.push(el("td", { class: "num" + (errors ? " neg" : ""), text: errors === null ? "–" : errors }));
        return cells;
      })));
    const table = el("table", { class: "paper", id: "paper-table-" + ti }, el("thead", null, head1, head2), el("tbody", null, body));
    return [el("h3", { text: t.title + ": ours [95% CI] n=questions (paper, Δ on the paper's setting)" }), el("div", { class: "scroll" }, table),
      notes.length ? el("ol", { class: "footnotes" }, notes.map((n, i) => el("li", { text: "†" + (i + 1) + " " + n }))) : null];
  }
  function genericTable(t, id) {
    const vi = t.columns.indexOf("verdict");
    const rows = t.rows.map((r) => el("tr", { class: vi >= 0 ? "verdict-" + r[vi] : null },
      r.map((v) => el("td", { class: typeof v === "number" ? "num" : null, text: num(v) }))));
    return el("div", { class: "scroll" }, el("table", { id: id },
      el("thead", null, el("tr", null, t.columns.map((c) => el("th", { text: c })))), el("tbody", null, rows)));
  }
  function claimsBlock(c) {
    const vi = c.columns.indexOf("verdict");
    const tested = c.rows.filter((r) => r[vi] !== "no runs"), untested = c.rows.filter((r) => r[vi] === "no runs");
    const count = {};
    for (const r of c.rows) count[r[vi]] = (count[r[vi]] || 0) + 1;
    return [el("h3", { text: c.title }), el("div", { class: "note", text: c.file + " · rows by verdict: " +
      Object.entries(count).map(([k, n]) => k + " " + n).join(", ") }),
    tested.length ? genericTable({ columns: c.columns, rows: tested }, "claims") : el("p", { class: "muted", text: "No claim could be tested with these runs." }),
    untested.length ? el("details", { class: "fold" }, el("summary", { text: untested.length + " claims without the runs to test them" }),
      genericTable({ columns: c.columns, rows: untested }, "claims-untested")) : null];
  }
  function kvTable(pairs) {
    return el("table", { class: "kv" }, el("tbody", null, pairs.map(([k, v]) => el("tr", null, el("td", { text: k }),
      el("td", null, v instanceof Node ? v : num(v))))));
  }
  function flat(obj) {
    return Object.entries(obj || {}).map(([k, v]) => k + " " + (typeof v === "object" && v !== null ? JSON.stringify(v) : num(v))).join(", ");
  }
  function runDetails(r, i) {
    const d = el("details", { class: "run", id: "run-" + i });
    append(d, [el("summary", null, el("b", { text: r.label }), " — " + r.dataset + " — ", el("span", { class: "muted", text: r.run_dir }),
      r.n_errors ? el("span", { class: "neg", text: " (" + r.n_errors + " errored questions)" }) : null),
    kvTable([["run dir", r.run_dir], ["git commit", r.commit || "(not recorded)"], ["fingerprint", r.fingerprint],
      ["data hashes", flat(r.data_hashes)], ["index hashes", flat(r.index_hashes)], ["question subset", flat(r.subset)],
      ["questions", r.n_questions], ["errored questions", r.n_errors], ["data vs paper", r.sample || "full split"],
      ["host", r.host], ["timings (s)", flat(r.timings)], ["packages", flat(r.packages)]]),
    r.errors.length ? [el("h4", { text: "Errors (first " + r.errors.length + ")" }),
      kvTable(r.errors.map(([q, e]) => [q, el("span", { class: "neg", text: e })]))] : null,
    r.notes.length ? el("div", { class: "warn", text: r.notes.join("\n") }) : null,
    el("details", { class: "fold" }, el("summary", { text: "config.yaml" }), el("pre", { text: r.config }))]);
    return d;
  }
  function showOverview() {
    const v = document.getElementById("view-overview");
    if (S.built.overview) return;
    S.built.overview = true;
    const nq = D.datasets.map((d) => d.name + ": " + d.questions.length + " questions, " + d.methods.length + " runs").join("; ");
    append(v, [el("h2", { text: "Overview" }),
      el("p", { class: "muted", text: D.runs.length + " runs. " + nq + ". Intervals: 95% percentile bootstrap over questions (" +
        D.resamples + " resamples, seed " + D.seed + "); an errored question counts as a miss." }),
      D.notes.length ? el("div", { class: "warn", text: "Notes:\n" + D.notes.join("\n") }) : null,
      D.unfinished.length ? [el("h3", { text: "Unfinished runs (not in the tables)" }),
        genericTable({ columns: ["method", "run_dir", "finished", "error"], rows: D.unfinished.map((u) => [u.method, u.run_dir, u.finished, u.error]) }, "unfinished")] : null,
      D.tables.map(paperTable),
      D.claims ? claimsBlock(D.claims) : null,
      D.cost ? [el("h3", { text: D.cost.title }), el("div", { class: "note", text: D.cost.file }), genericTable(D.cost, "cost")] : null,
      D.analyses.map((t, i) => el("details", { class: "analysis", open: t.rows.length <= 15 }, el("summary", null, el("b", { text: t.title }),
        el("span", { class: "note", text: "  " + t.file + " · " + t.rows.length + " rows" })), genericTable(t, "analysis-" + i))),
      D.figures.length ? [el("h3", { text: "Figures" }), el("div", { class: "figures" },
        D.figures.map((f) => el("a", { href: f, target: "_blank" }, el("img", { src: f, alt: f, title: f }))))] : null,
      D.failures ? [el("h3", { text: "Failures" }), el("pre", { text: D.failures })] : null,
      el("h3", { text: "Provenance" }), D.runs.map(runDetails)]);
  }

  // -- questions ---------------------------------------------------------------------------------------------
  function ranksAt(c, k) { return c.g[String(k)] || c.g.final; }
  function hits(c, k) { return ranksAt(c, k).map((r) => r > 0 && r <= k); }
  function recall(row, c, k) {
    const ng = c && c.ng !== undefined ? c.ng : row.ng;  // c.ng: the run's own gold count (another corpus or questions file)
    if (!c || !ng) return null;
    return 100 * hits(c, k).filter(Boolean).length / ng;
  }
  function findsMissed(row, a, b, k) {
    const ca = row.m[a], cb = row.m[b];
    if (!ca || !cb) return false;
    const ha = hits(ca, k), hb = hits(cb, k);
    return ha.some((h, i) => h && !hb[i]);
  }
  function errCount(row) { return row.m.filter((c) => c && c.err).length; }
  function matches(row, f) {
    if (f.type && row.type !== f.type) return false;
    if (f.err === "some" && !errCount(row)) return false;
    if (f.err === "none" && errCount(row)) return false;
    if (f.text) {
      const t = f.text.toLowerCase();
      if (!(row.id.toLowerCase().includes(t) || row.q.toLowerCase().includes(t) || row.ans.some((x) => String(x).toLowerCase().includes(t)))) return false;
    }
    if (f.a >= 0 && f.b >= 0 && !findsMissed(row, f.a, f.b, f.k)) return false;
    return true;
  }
  function sortKey(col, row, k) {
    if (col === "id") return row.id;
    if (col === "q") return row.q.toLowerCase();
    if (col === "type") return row.type;
    if (col === "ans") return String(row.ans[0] || "").toLowerCase();
    if (col === "ng") return row.ng;
    if (col === "err") return errCount(row);
    const m = /^m(\d+)\.(r|em|f1)$/.exec(col);
    if (!m) return 0;
    const c = row.m[parseInt(m[1], 10)];
    if (!c) return -1;
    if (m[2] === "r") return recall(row, c, k);
    return c[m[2]] === null || c[m[2]] === undefined ? -1 : c[m[2]];
  }
  function filtered() {
    const ds = dataset(), f = S.qf;
    const idx = [];
    ds.questions.forEach((row, i) => { if (matches(row, f)) idx.push(i); });
    if (f.sort) {
      const keys = new Map(idx.map((i) => [i, sortKey(f.sort, ds.questions[i], f.k)]));
      idx.sort((x, y) => { const a = keys.get(x), b = keys.get(y); return (a < b ? -1 : a > b ? 1 : x - y) * (a === b ? 1 : f.dir); });
    }
    return idx;
  }
  function methodSelect(id, value, none) {
    const s = el("select", { id: id }, el("option", { value: -1, text: none }),
      dataset().methods.map((m, i) => el("option", { value: i, text: m.label })));
    s.value = String(value);
    return s;
  }
  function buildQuestionControls(v) {
    const ds = dataset(), f = S.qf;
    const set = (key, val) => { f[key] = val; f.page = 1; history.replaceState(null, "", filterHash(f)); renderQuestionTable(); };
    const type = el("select", { id: "f-type", onchange: () => set("type", type.value) }, el("option", { value: "", text: "all hop types" }),
      ds.types.filter((t) => t).map((t) => el("option", { value: t, text: t })));
    type.value = f.type;
    const text = el("input", { id: "f-text", type: "search", placeholder: "id, question or answer", value: f.text,
      oninput: () => set("text", text.value) });
    const err = el("select", { id: "f-err", onchange: () => set("err", err.value) }, el("option", { value: "any", text: "any" }),
      el("option", { value: "some", text: "some method errored" }), el("option", { value: "none", text: "no method errored" }));
    err.value = f.err;
    const a = methodSelect("f-a", f.a, "— method A —");
    const b = methodSelect("f-b", f.b, "— method B —");
    a.addEventListener("change", () => set("a", parseInt(a.value, 10)));
    b.addEventListener("change", () => set("b", parseInt(b.value, 10)));
    const k = el("input", { id: "f-k", type: "number", min: 1, max: 1000, value: f.k,
      oninput: () => { const x = parseInt(k.value, 10); if (x >= 1) set("k", x); } });
    const reset = el("button", { id: "f-reset", text: "reset", onclick: () => { S.qf = defaultFilter(ds); history.replaceState(null, "", filterHash(S.qf)); S.built.questions = null; showQuestions(new URLSearchParams()); } });
    append(clear(v), [el("h2", { text: "Questions — " + ds.name }),
      el("div", { class: "controls" }, datasetPicker((i) => { location.hash = "#questions?ds=" + i; }),
        el("label", null, "hop type ", type), el("label", null, "text ", text), el("label", null, "errors ", err),
        el("label", null, "k ", k), el("span", null, a, " finds a gold passage that ", b, " misses at k"), reset),
      el("p", null, el("span", { id: "q-count", class: "count" }), el("span", { id: "q-total", class: "muted" })),
      el("div", { class: "scroll" }, el("table", { id: "q-table" })),
      el("p", null, el("button", { id: "q-more", text: "show more", onclick: () => { f.page += 1; renderQuestionTable(); } }))]);
  }
  function renderQuestionTable() {
    const ds = dataset(), f = S.qf;
    const idx = filtered();
    S.list = idx;
    document.getElementById("q-count").textContent = String(idx.length);
    document.getElementById("q-total").textContent = " of " + ds.questions.length + " questions match";
    // methods A and B of the filter first; per method R@k, EM and F1 under one header
    const order = [f.a, f.b].filter((x) => x >= 0 && x < ds.methods.length);
    ds.methods.forEach((_, i) => { if (!order.includes(i)) order.push(i); });
    const sortTh = (key, label, extra) => el("th", Object.assign({
      class: f.sort === key ? (f.dir > 0 ? "sorted-asc" : "sorted-desc") : null, dataset: { col: key }, text: label,
      onclick: () => { if (f.sort === key) f.dir = -f.dir; else { f.sort = key; f.dir = key.startsWith("m") ? -1 : 1; }
        history.replaceState(null, "", filterHash(f)); renderQuestionTable(); } }, extra || {}));
    const base = [["id", "id"], ["q", "question"], ["type", "hop type"], ["ans", "gold answer"], ["ng", "gold"]];
    const head1 = el("tr", null, base.map(([key, label]) => sortTh(key, label, { rowspan: 2 })),
      order.map((i) => el("th", { class: "mhead", colspan: (ds.methods[i].recall ? 1 : 0) + (ds.methods[i].qa ? 2 : 0), text: ds.methods[i].label })),
      sortTh("err", "errors", { rowspan: 2 }));
    const head2 = el("tr", null, order.map((i) => [ds.methods[i].recall ? sortTh("m" + i + ".r", "R@" + f.k) : null,
      ds.methods[i].qa ? [sortTh("m" + i + ".em", "EM"), sortTh("m" + i + ".f1", "F1")] : null]));
    const head = [head1, head2];
    const shown = idx.slice(0, f.page * PAGE);
    const rows = shown.map((i) => {
      const row = ds.questions[i];
      const cells = [el("td", null, el("a", { href: "#q?" + params({ ds: S.ds, i: i, a: f.a >= 0 ? f.a : 0, b: f.b >= 0 ? f.b : "" }), text: row.id })),
        el("td", { class: "qtext", text: row.q }), el("td", { text: row.type }),
        el("td", { class: "ans", text: row.ans.length ? row.ans[0] + (row.ans.length > 1 ? " (+" + (row.ans.length - 1) + ")" : "") : "–", title: row.ans.join(" | ") }),
        el("td", { class: "num", text: row.ng })];
      order.forEach((j) => {
        const m = ds.methods[j], c = row.m[j];
        const r = recall(row, c, f.k);
        if (m.recall) {
          cells.push(el("td", { class: "num" + (r === 100 ? " r100" : r === 0 ? " r0" : ""), title: c && c.err ? c.err : null,
            text: c ? num(r, 0) + (c.err ? " !" : "") : "–" }));
        }
        if (m.qa) {
          cells.push(el("td", { class: "num", text: c && c.em !== undefined && c.em !== null ? num(100 * c.em, 0) : "–", title: c && c.a !== undefined ? "answer: " + c.a : null }));
          cells.push(el("td", { class: "num", text: c && c.f1 !== undefined && c.f1 !== null ? num(100 * c.f1, 1) : "–" }));
        }
      });
      const n = errCount(row);
      cells.push(el("td", { class: "num" + (n ? " err" : ""), text: n, title: n ? row.m.map((c, j) => c && c.err ? ds.methods[j].label + ": " + c.err : null).filter(Boolean).join("\n") : null }));
      return el("tr", { dataset: { qi: i } }, cells);
    });
    append(clear(document.getElementById("q-table")), [el("thead", null, head), el("tbody", null, rows)]);
    document.getElementById("q-more").hidden = shown.length >= idx.length;
  }
  function showQuestions(p) {
    const ds = dataset();
    const v = document.getElementById("view-questions");
    if (!S.qf || [...p.keys()].some((k) => k !== "ds")) S.qf = readFilter(p, ds);
    if (S.built.questions !== S.ds) { buildQuestionControls(v); S.built.questions = S.ds; }
    else {
      const f = S.qf;
      document.getElementById("f-type").value = f.type; document.getElementById("f-text").value = f.text;
      document.getElementById("f-err").value = f.err; document.getElementById("f-a").value = String(f.a);
      document.getElementById("f-b").value = String(f.b); document.getElementById("f-k").value = String(f.k);
    }
    renderQuestionTable();
  }

  // -- one question ------------------------------------------------------------------------------------------
  const loaded = {}, waiting = {};
  window.EXPLORER_QUESTION = function (key, data) {
    loaded[key] = data;
    for (const cb of waiting[key] || []) cb(data);
    delete waiting[key];
  };
  function loadQuestion(key, cb, onError) {
    if (loaded[key]) { cb(loaded[key]); return; }
    if (waiting[key]) { waiting[key].push(cb); return; }
    waiting[key] = [cb];
    const s = document.createElement("script");
    s.src = "explorer/q/" + key + ".js"; // key = "d<int>/<int>", built from numbers only
    s.onerror = () => { delete waiting[key]; onError(s.src); };
    document.head.appendChild(s);
  }
  // A method's view of a question's passages: the texts of the corpus it read and its own gold ids. A dataset whose
  // runs read several corpora has ds.corpora, methods[i].corpus and one passages dict per corpus (docs/explorer.md).
  function corpusOf(mi) { return dataset().methods[mi].corpus || 0; }
  function goldOf(Q, mi) { const M = Q.methods[mi]; return M && M.gold ? M.gold : Q.gold; }
  function view(Q, ci, gold) {
    const corpora = dataset().corpora;
    return { passages: Array.isArray(Q.passages) ? Q.passages[ci] || {} : Q.passages, gold: gold,
      unavailable: corpora && corpora[ci] ? corpora[ci].note : null };
  }
  function passage(V, pid, rank, chip) {
    const p = V.passages[pid];
    const gold = V.gold.includes(pid);
    const title = p ? (p[0] || "(untitled)") : V.unavailable ? "(passage " + pid + ": text unavailable)" : "(passage " + pid + " not in the corpus file)";
    const d = el("details", { class: "passage" + (chip ? " chip" : "") + (gold ? " gold" : ""), dataset: { pid: pid } },
      el("summary", { title: "passage " + pid + (gold ? " (gold)" : "") }, rank ? el("span", { class: "rank", text: rank + "." }) : null, el("span", { class: "ptitle", text: title }),
        gold ? el("span", { class: "goldmark", text: " ★ gold" }) : null, chip ? null : el("span", { class: "pid", text: " #" + pid })),
      el("div", { class: "ptext", text: p ? p[1] : "" }));
    return d;
  }
  function cell(V, c) {
    if (c === null || c === undefined) return "–";
    if (Array.isArray(c)) return el("div", { class: "stack" }, c.map((x) => el("div", null, cell(V, x))));
    if (typeof c !== "object") return num(c);
    if (c.t === "passages") return c.ids.length ? el("div", null, c.ids.map((id) => passage(V, id, null, true))) : "(none)";
    if (c.t === "triples") return c.items.length ? el("div", null, c.items.map((t) => el("div", { class: "triple", text: "⟨" + t.join(", ") + "⟩" }))) : "(none)";
    if (c.t === "text") {
      if (!c.text) return "–";
      const head = c.text.length > 70 ? c.text.slice(0, 70).replace(/\s+/g, " ") + "…" : c.text;
      return el("details", { class: "fold" }, el("summary", { text: head }), el("pre", { text: c.text }));
    }
    if (c.t === "json") return el("details", { class: "fold" }, el("summary", { text: "trace" }), el("pre", { text: JSON.stringify(c.value, null, 1) }));
    return el("pre", { text: JSON.stringify(c) });
  }
  function block(V, b) {
    const table = el("table", null, el("thead", null, el("tr", null, b.columns.map((c) => el("th", { text: c })))),
      el("tbody", null, b.rows.map((r) => el("tr", null, r.map((c) => el("td", null, cell(V, c)))))));
    const note = b.note ? el("div", { class: "note", text: b.note }) : null;
    if (b.folded) {
      return el("details", { class: "block" }, el("summary", null, el("b", { text: b.title }), el("span", { class: "note", text: "  (" + b.rows.length + " rows)" })), note, table);
    }
    return el("div", { class: "block" }, el("h4", { text: b.title }), note, table);
  }
  function methodPanel(Q, row, mi, k, side) {
    const ds = dataset(), m = ds.methods[mi], M = Q.methods[mi], c = row.m[mi];
    const panel = el("div", { class: "panel", id: "panel-" + side, dataset: { method: mi } }, el("h3", { text: m.label }));
    if (!M) return append(panel, [el("p", { class: "muted", text: "This run has no record of this question." })]);
    const V = view(Q, corpusOf(mi), goldOf(Q, mi));
    const recalls = ds.ks.map((kk) => "R@" + kk + " " + num(recall(row, c, kk), 0)).join(" · ");
    const pct = (x, d) => num(x === undefined || x === null ? null : 100 * x, d);  // EM/F1 are stored as fractions
    append(panel, [el("div", null, el("b", { text: recalls }), M.answer !== undefined ? el("span", null, " · answer ",
      el("b", { text: M.answer === null ? "(none)" : M.answer }), " · EM " + pct(M.em, 0) + " · F1 " + pct(M.f1, 1)) : null)]);
    if (M.error) append(panel, [el("div", { class: "warn", text: "error: " + M.error })]);
    const ranking = (M.rankings[String(k)] || M.rankings.final || []).slice(0, k);
    const pass = M.rankings[String(k)] ? "the pass at k=" + k : "the final ranking";
    append(panel, [el("h4", { text: "Top " + k + " (" + pass + ")" }),
      el("ol", { class: "topk" }, ranking.map((pid, i) => el("li", { class: V.gold.includes(pid) ? "gold" : null, dataset: { pid: pid } }, passage(V, pid, i + 1, false))))]);
    const outside = V.gold.filter((g) => !ranking.includes(g));
    if (outside.length) {
      append(panel, [el("h4", { text: "Gold passages outside the top " + k }), el("ul", null, outside.map((g) =>
        el("li", null, passage(V, g, null, true), " — " + (M.gold_rank[g] ? "rank " + M.gold_rank[g] + " of the final list"
          : !V.unavailable && !V.passages[g] ? "gold passage not in the corpus (no method can retrieve it)"
          : "not in the saved list (" + M.depth_saved + " ids)"))))]);
    }
    if (M.answer !== undefined || M.qa_raw !== undefined) {
      append(panel, [el("h4", { text: "Answer" }), kvTable([["answer", M.answer === null ? "(none)" : M.answer], ["EM", pct(M.em, 0)], ["F1", pct(M.f1, 1)],
        ["mode", M.qa_mode], ["passages given to the reader", M.qa_passages ? cell(V, { t: "passages", ids: M.qa_passages }) : "–"],
        ["reader reply", cell(V, { t: "text", text: M.qa_raw })]])]);
    }
    append(panel, M.sections.map((b) => block(V, b)));
    const calls = M.llm_calls;
    if (calls.length) {
      const keys = [];
      for (const c2 of calls) for (const kk of Object.keys(c2)) if (!keys.includes(kk)) keys.push(kk);
      const sum = (f) => calls.reduce((s, c2) => s + (c2[f] || 0), 0);
      const value = (x) => {
        if (Array.isArray(x) && x.every((m) => m && typeof m.content === "string")) {  // llm.record_prompts: the messages
          return cell(V, { t: "text", text: x.map((m) => "[" + m.role + "]\n" + m.content).join("\n\n") });
        }
        if (typeof x === "string" && x.length > 60) return cell(V, { t: "text", text: x });
        if (typeof x === "object" && x !== null) return cell(V, { t: "json", value: x });
        return num(x);
      };
      const table = el("table", null, el("thead", null, el("tr", null, keys.map((kk) => el("th", { text: kk })))),
        el("tbody", null, calls.map((c2) => el("tr", null, keys.map((kk) => el("td", null, value(c2[kk])))))));
      append(panel, [el("details", { class: "fold" },
        el("summary", { text: "LLM calls: " + calls.length + " (" + sum("prompt_tokens") + " prompt + " + sum("completion_tokens") + " completion tokens)" }),
        calls.some((c2) => c2.messages !== undefined) ? null
          : el("div", { class: "note", text: "Prompts are not stored in predictions.jsonl (run with llm.record_prompts=true to keep them); the replies are in the method's blocks above." }), table)]);
    }
    append(panel, [el("details", { class: "fold" }, el("summary", { text: "timings" }), kvTable(Object.entries(M.timings).map(([kk, vv]) => [kk, typeof vv === "object" ? JSON.stringify(vv) : vv])))]);
    return panel;
  }
  function showQuestion(p) {
    const v = document.getElementById("view-q");
    const ds = dataset();
    const i = p.has("i") ? parseInt(p.get("i"), 10) : (S.list && S.list.length ? S.list[0] : 0);
    const a = p.has("a") ? parseInt(p.get("a"), 10) : 0;
    const b = p.has("b") ? parseInt(p.get("b"), 10) : -1;
    const k = p.has("k") ? parseInt(p.get("k"), 10) : maxK(ds);
    if (!(i >= 0 && i < ds.questions.length)) { append(clear(v), [el("p", { text: "No such question." })]); return; }
    const row = ds.questions[i];
    const key = "d" + S.ds + "/" + i;
    delete v.dataset.loaded;
    append(clear(v), [el("p", { class: "muted", text: "loading " + row.id + " …" })]);
    loadQuestion(key, (Q) => {
      const go = (o) => { location.hash = "#q?" + params(Object.assign({ ds: S.ds, i: i, a: a, b: b >= 0 ? b : "", k: k }, o)); };
      const list = S.list || ds.questions.map((_, j) => j);
      const pos = list.indexOf(i);
      const sa = methodSelect("q-a", a, "— none —"), sb = methodSelect("q-b", b, "— none —");
      sa.addEventListener("change", () => go({ a: parseInt(sa.value, 10) }));
      sb.addEventListener("change", () => go({ b: parseInt(sb.value, 10) >= 0 ? parseInt(sb.value, 10) : "" }));
      const ks = [...new Set([...ds.ks, 1, 2, 3, 20, 30, 50, 100])].sort((x, y) => x - y);
      const sk = el("select", { id: "q-k", onchange: () => go({ k: parseInt(sk.value, 10) }) }, ks.map((x) => el("option", { value: x, text: x })));
      sk.value = String(k);
      // one row per (corpus, gold id) of the methods' own gold; a method on another corpus or gold list: "n/a"
      const goldRows = [], seen = new Set();
      Q.methods.forEach((M, mi) => {
        if (!M) return;
        for (const g of goldOf(Q, mi)) {
          const key = corpusOf(mi) + "/" + g;
          if (!seen.has(key)) { seen.add(key); goldRows.push([corpusOf(mi), g]); }
        }
      });
      const several = ds.corpora && ds.corpora.length > 1;
      const goldTable = el("table", { id: "gold-ranks" }, el("thead", null, el("tr", null, el("th", { text: "gold passage" }),
        ds.methods.map((m) => el("th", { text: m.label })))), el("tbody", null, goldRows.map(([ci, g]) => el("tr", null,
        el("td", null, passage(view(Q, ci, [g]), g, null, true), several ? el("span", { class: "muted", text: " (corpus " + (ci + 1) + ")" }) : null),
        Q.methods.map((M, mi) => !M ? el("td", { class: "num", text: "–" })
          : corpusOf(mi) !== ci || !goldOf(Q, mi).includes(g) ? el("td", { class: "num muted", text: "n/a", title: "not a gold passage of this run (it read another corpus or questions file)" })
            : el("td", { class: "num", text: M.gold_rank[g] ? String(M.gold_rank[g]) : "> " + M.depth_saved }))))));
      const pair = el("div", { class: "pair" + (b >= 0 ? " two" : "") }, a >= 0 ? methodPanel(Q, row, a, k, "a") : null,
        b >= 0 ? methodPanel(Q, row, b, k, "b") : null);
      append(clear(v), [
        el("p", null, el("a", { href: S.qf ? filterHash(S.qf) : "#questions?ds=" + S.ds, text: "← questions" }),
          pos > 0 ? [" · ", el("a", { id: "q-prev", href: "#q?" + params({ ds: S.ds, i: list[pos - 1], a: a, b: b >= 0 ? b : "", k: k }), text: "previous" })] : null,
          pos >= 0 && pos < list.length - 1 ? [" · ", el("a", { id: "q-next", href: "#q?" + params({ ds: S.ds, i: list[pos + 1], a: a, b: b >= 0 ? b : "", k: k }), text: "next" })] : null,
          pos >= 0 ? el("span", { class: "muted", text: "  (" + (pos + 1) + " of " + list.length + " in the question list)" }) : null),
        el("div", { class: "qhead" }, el("div", { class: "qtext", id: "q-text", text: Q.question }),
          el("div", { class: "muted", text: "id " + Q.id + " · hop type " + (Q.type || "–") + " · gold answer: " + Q.answers.join(" | ") })),
        ds.data_notes ? el("div", { class: "warn", id: "q-data-notes", text: ds.data_notes.join("\n") }) : null,
        el("h4", { text: "Gold passages: rank in each method's final list" }), el("div", { class: "scroll" }, goldTable),
        el("div", { class: "controls" }, el("label", null, "method ", sa), el("label", null, "side by side with ", sb), el("label", null, "top k ", sk)),
        pair]);
      v.dataset.loaded = key;
    }, (src) => { append(clear(v), [el("div", { class: "warn", text: "could not load " + src + " (is the explorer/ folder beside index.html?)" })]); });
  }

  // -- plots (inline SVG) ------------------------------------------------------------------------------------
  function niceMax(y) {
    if (y <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(y)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= y) return m * p;
    return 10 * p;
  }
  function chart(opts) {
    // opts: title, series, xs [min, max], xticks, xlabels, xlabel, ylabel, ymax, logx, draw(g, X, Y, x0, x1, shown)
    const hidden = new Set();
    const box = el("div", { class: "plot" });
    const render = () => {
      const shown = opts.series.filter((s) => !hidden.has(s.label));
      const W = 760, H = 340, L = 56, R = 14, T = 26, B = 40;
      const x0 = opts.xs[0], x1 = opts.xs[1] > x0 ? opts.xs[1] : x0 + 1;
      const ymax = opts.ymax || niceMax(Math.max(1e-9, ...shown.flatMap((s) => s.hi.concat(s.mean))));
      const fx = opts.logx ? Math.log : (x) => x;
      const X = (x) => L + (fx(x) - fx(x0)) / (fx(x1) - fx(x0)) * (W - L - R);
      const Y = (y) => T + (1 - Math.min(y, ymax) / ymax) * (H - T - B);
      const g = sv("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img" });
      append(g, [sv("text", { x: L, y: 16, "font-weight": 600 }, opts.title)]);
      for (let i = 0; i <= 5; i++) {
        const y = ymax * i / 5;
        append(g, [sv("line", { x1: L, x2: W - R, y1: Y(y), y2: Y(y), stroke: "#eee" }),
          sv("text", { x: L - 6, y: Y(y) + 4, "text-anchor": "end" }, num(y))]);
      }
      for (const t of opts.xticks) append(g, [sv("text", { x: X(t), y: H - B + 16, "text-anchor": "middle" }, opts.xlabels ? opts.xlabels[t] : t)]);
      append(g, [sv("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#888" }), sv("line", { x1: L, x2: L, y1: T, y2: H - B, stroke: "#888" }),
        sv("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, opts.xlabel + (opts.logx ? " (log scale)" : "")),
        sv("text", { x: 14, y: (T + H - B) / 2, transform: "rotate(-90 14 " + (T + H - B) / 2 + ")", "text-anchor": "middle" }, opts.ylabel)]);
      opts.draw(g, X, Y, x0, x1, shown);
      const leg = el("div", { class: "small legend" }, opts.series.map((s) => el("span", {
        class: "leg" + (hidden.has(s.label) ? " off" : ""), title: "click to hide or show",
        onclick: () => { if (hidden.has(s.label)) hidden.delete(s.label); else hidden.add(s.label); render(); } },
      el("span", { class: "swatch", style: "background:" + COLORS[s.color] }), s.label)));
      append(clear(box), [g, leg]);
    };
    render();
    return box;
  }
  function tip(s, what, i) {
    return sv("title", null, s.label + ": " + what + ": " + num(s.mean[i], 1) + " [" + num(s.lo[i], 1) + ", " + num(s.hi[i], 1) + "] n=" + s.n);
  }
  function lineChart(title, series, xlabel, ylabel, logx) {
    if (!series.length) return el("p", { class: "muted", text: title + ": no run has this quantity." });
    series.forEach((s, i) => { if (s.color === undefined) s.color = i % COLORS.length; });
    const all = series.flatMap((s) => s.x);
    const x0 = Math.min(...all), x1 = Math.max(...all);
    const ticks = x1 - x0 <= 12 ? Array.from({ length: x1 - x0 + 1 }, (_, i) => x0 + i)
      : [x0, ...[2, 5, 10, 15, 20, 30, 50, 100, 200, 500].filter((t) => t > x0 && t <= x1)];
    return chart({ title: title, series: series, xs: [x0, x1], xticks: ticks, xlabel: xlabel, ylabel: ylabel, logx: logx && x1 > 12,
      draw: (g, X, Y, a, b, shown) => {
        shown.forEach((s) => {
          const col = COLORS[s.color];
          const px = s.flat ? [a, b] : s.x, pm = s.flat ? [s.mean[0], s.mean[0]] : s.mean;
          const plo = s.flat ? [s.lo[0], s.lo[0]] : s.lo, phi = s.flat ? [s.hi[0], s.hi[0]] : s.hi;
          const band = px.map((x, i) => X(x) + "," + Y(phi[i])).concat(px.map((x, i) => X(x) + "," + Y(plo[i])).reverse()).join(" ");
          append(g, [sv("polygon", { points: band, fill: col, "fill-opacity": 0.08, stroke: "none" }),
            sv("polyline", { points: px.map((x, i) => X(x) + "," + Y(pm[i])).join(" "), fill: "none", stroke: col, "stroke-width": 2,
              "stroke-dasharray": s.flat || s.dashed ? "6 4" : null }, s.flat ? tip(s, "single-step", 0) : null)]);
          if (s.flat) return;
          s.x.forEach((x, i) => {
            if (s.x.length <= 12) append(g, [sv("line", { x1: X(x), x2: X(x), y1: Y(s.lo[i]), y2: Y(s.hi[i]), stroke: col })]);
            append(g, [sv("circle", { cx: X(x), cy: Y(s.mean[i]), r: s.x.length <= 12 ? 3.5 : 5, fill: s.x.length <= 12 ? col : "transparent" },
              tip(s, xlabel + " " + x, i))]);
          });
        });
      } });
  }
  function typeChart(title, series) {
    if (!series.length) return el("p", { class: "muted", text: title + ": no run has this quantity." });
    const types = [];
    for (const s of series) for (const t of s.types) if (!types.includes(t.type)) types.push(t.type);
    types.sort();
    series.forEach((s, i) => { s.color = i % COLORS.length; s.hi = s.types.map((t) => t.hi); s.mean = s.types.map((t) => t.mean); });
    const labels = {};
    types.forEach((t, i) => { labels[i] = t; });
    return chart({ title: title, series: series, xs: [-0.5, types.length - 0.5], xticks: types.map((_, i) => i), xlabels: labels,
      xlabel: "hop type", ylabel: "R@k", ymax: 100,
      draw: (g, X, Y, a, b, shown) => {
        const w = 0.7 / Math.max(1, shown.length);
        shown.forEach((s, si) => {
          const col = COLORS[s.color];
          for (const t of s.types) {
            const x = types.indexOf(t.type) - 0.35 + w * (si + 0.5);
            append(g, [sv("line", { x1: X(x), x2: X(x), y1: Y(t.lo), y2: Y(t.hi), stroke: col, "stroke-width": 2 }),
              sv("circle", { cx: X(x), cy: Y(t.mean), r: 4, fill: col }, sv("title", null,
                s.label + ": " + t.type + " R@" + s.k + " " + num(t.mean, 1) + " [" + num(t.lo, 1) + ", " + num(t.hi, 1) + "] n=" + t.n))]);
          }
        });
      } });
  }
  function showPlots() {
    const v = document.getElementById("view-plots");
    if (S.plotsBuilt.ds === S.ds) return;
    S.plotsBuilt.ds = S.ds;
    const P = D.plots[S.ds];
    const ds = dataset();
    const k = maxK(ds);
    const byLabel = {};
    ds.methods.forEach((m, i) => { byLabel[m.label] = i % COLORS.length; });
    const tok = P.tokens.map((s) => Object.assign({}, s, { color: byLabel[s.label.replace(/ (input|output)$/, "")] }));
    append(clear(v), [el("h2", { text: "Plots — " + ds.name }), datasetPicker((i) => { location.hash = "#plots?ds=" + i; }),
      el("p", { class: "muted", text: "Shaded bands and bars: 95% percentile bootstrap intervals over questions (" + D.resamples +
        " resamples, seed " + D.seed + "), the tables' intervals. Hover a point for its numbers." }),
      lineChart("Recall@k for k = 1 … saved depth", P.curves, "k", "R@k", true),
      lineChart("R@" + k + " after each round (the list had the method stopped there; dashed: single-step)", P.rounds, "round n", "R@" + k),
      typeChart("R@" + k + " by hop type", P.types),
      lineChart("Cumulative LLM tokens per question after each round (retrieval stages; dashed: output)", tok, "round n", "tokens")]);
  }

  // -- start -------------------------------------------------------------------------------------------------
  document.getElementById("generated").textContent = "generated " + D.generated;
  window.addEventListener("hashchange", route);
  route();
  document.documentElement.dataset.ready = "1";
  window.EXPLORER_READY_MS = performance.now(); // since navigation start: data parsed, first view built
  requestAnimationFrame(() => setTimeout(() => { window.EXPLORER_PAINTED_MS = performance.now(); }, 0)); // laid out, painted
})();

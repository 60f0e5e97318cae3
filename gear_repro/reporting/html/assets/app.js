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
    // mode: with methods A and B chosen, which questions: "a" A finds a gold passage B misses (at k), "b" the other way,
    // "either" one of the two, "all" every question (compare only: the Δ column, the win/tie/loss line)
    return { type: "", text: "", err: "any", a: -1, b: -1, k: maxK(ds), sort: "", dir: 1, page: 1, mode: "a",
      cols: ds.methods.length > 4 ? "r" : "all", dm: "r" };
  }
  function readFilter(p, ds) {
    const f = defaultFilter(ds);
    if (p.has("type")) f.type = p.get("type");
    if (p.has("text")) f.text = p.get("text");
    if (p.has("err")) f.err = p.get("err");
    for (const key of ["a", "b", "k", "dir"]) if (p.has(key) && !Number.isNaN(parseInt(p.get(key), 10))) f[key] = parseInt(p.get(key), 10);
    if (p.has("sort")) f.sort = p.get("sort");
    if (["a", "b", "either", "all"].includes(p.get("mode"))) f.mode = p.get("mode");
    if (["r", "all"].includes(p.get("cols"))) f.cols = p.get("cols");
    if (["r", "em", "f1"].includes(p.get("dm"))) f.dm = p.get("dm");
    return f;
  }
  function filterHash(f) {
    return "#questions?" + params({ ds: S.ds, type: f.type, text: f.text, err: f.err === "any" ? "" : f.err,
      a: f.a >= 0 ? f.a : "", b: f.b >= 0 ? f.b : "", mode: f.a >= 0 && f.b >= 0 && f.mode !== "a" ? f.mode : "", k: f.k,
      sort: f.sort, dir: f.sort ? f.dir : "", cols: f.cols, dm: f.dm === "r" ? "" : f.dm });
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
          const few = x.n !== null && x.n !== undefined && x.n < D.small_n;  // an example, not a result
          const td = el("td", { class: "cell" + (few ? " smalln" : ""), dataset: { dataset: c.dataset, metric: c.metric, label: r.label },
            title: few ? "only " + x.n + " questions (fewer than " + D.small_n + "): an example, not a result" : null });
          append(td, [el("span", { class: "ours", text: x.text })]);
          if (few) append(td, [el("span", { class: "smallbadge", text: " too few" })]);
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
  // "Who wins": per dataset, a win/tie/loss matrix of every pair of methods on one metric, question by question.
  function metricChoices(ds) {
    const out = ds.ks.map((k) => ({ key: "r" + k, metric: "r", k: k, label: "R@" + k }));
    if (ds.methods.some((m) => m.qa)) out.push({ key: "em", metric: "em", k: maxK(ds), label: "EM" }, { key: "f1", metric: "f1", k: maxK(ds), label: "F1" });
    return out;
  }
  // Why compare() would not pair methods a and b of ds (another corpus, other questions or gold), else null.
  function unpairedWhy(ds, a, b) {
    const u = ds.unpaired || {};
    return u[Math.min(a, b) + "/" + Math.max(a, b)] || null;
  }
  function winsBlock(ds, di) {
    const choices = metricChoices(ds);
    const sel = el("select", { id: "wtl-metric-" + di }, choices.map((c) => el("option", { value: c.key, text: c.label })));
    sel.value = "r" + maxK(ds);
    const box = el("div", { class: "scroll" });
    const render = () => {
      const c = choices.find((x) => x.key === sel.value) || choices[0];
      const ms = ds.methods.map((m, i) => i).filter((i) => c.metric === "r" ? ds.methods[i].recall : ds.methods[i].qa);
      const res = {}, net = {};
      // a pair with a run of fewer than D.small_n questions is an example: uncoloured and out of the net wins, unless
      // every run is that small
      const allSmall = ms.every((i) => smallN(ds.methods[i]));
      const counted = (a, b) => allSmall || !(smallN(ds.methods[a]) || smallN(ds.methods[b]));
      for (const a of ms) {
        net[a] = 0;
        for (const b of ms) {
          if (a === b || unpairedWhy(ds, a, b)) continue;
          res[a + "/" + b] = winTieLoss(ds, a, b, c.metric, c.k);
          if (counted(a, b)) net[a] += res[a + "/" + b].w - res[a + "/" + b].l;
        }
      }
      const best = ms.length ? Math.max(...ms.map((a) => net[a])) : 0;
      const label = (i) => [ds.methods[i].label, el("span", { class: "muted", text: " n=" + num(ds.methods[i].n) }),
        smallN(ds.methods[i]) ? el("span", { class: "smallbadge", title: "fewer than " + D.small_n + " questions: not a result", text: " too few" }) : null];
      const table = el("table", { class: "wtl", id: "wtl-" + di, dataset: { metric: c.key } },
        el("thead", null, el("tr", null, el("th", { text: "row vs column (" + c.label + ")" }), ms.map((b) => el("th", { class: smallN(ds.methods[b]) ? "smalln" : null }, label(b))),
          el("th", { text: "net wins", title: "Σ over columns of (wins − losses); pairs with a run of fewer than " + D.small_n + " questions left out" }))),
        el("tbody", null, ms.map((a) => el("tr", { class: smallN(ds.methods[a]) ? "smalln" : null },
          el("th", null, label(a)),
          ms.map((b) => {
            if (a === b) return el("td", { class: "num muted", text: "—" });
            const why = unpairedWhy(ds, a, b);
            if (why) return el("td", { class: "num muted unpaired", dataset: { a: a, b: b }, title: why, text: "not paired" });
            const r = res[a + "/" + b];
            const share = r.n && counted(a, b) ? (r.w - r.l) / r.n : 0;
            const bg = share > 0 ? "rgba(29,122,58," + (0.08 + 0.5 * share).toFixed(3) + ")" : share < 0 ? "rgba(179,38,30," + (0.08 - 0.5 * share).toFixed(3) + ")" : null;
            return el("td", { class: "num wtlcell" + (counted(a, b) ? "" : " smalln"), style: bg ? "background:" + bg : null,
              dataset: { a: a, b: b, w: r.w, t: r.t, l: r.l, n: r.n },
              title: ds.methods[a].label + " vs " + ds.methods[b].label + " on " + c.label + ": higher on " + r.w + ", equal on " + r.t + ", lower on " + r.l +
                " of the " + r.n + " questions both ran; mean Δ " + (r.n ? (r.sum / r.n >= 0 ? "+" : "") + num(r.sum / r.n, 1) : "–") + ". Click: those questions sorted by Δ.",
              onclick: () => { location.hash = "#questions?" + params({ ds: di, a: a, b: b, mode: "all", dm: c.metric, k: c.k, sort: "diff", dir: -1 }); } },
            el("span", { class: "pos", text: r.w }), " / " + r.t + " / ", el("span", { class: "neg", text: r.l }),
            el("div", { class: "muted small", text: "Δ " + (r.n ? (r.sum >= 0 ? "+" : "") + num(r.sum / r.n, 1) : "–") + " · n=" + r.n }));
          }),
          el("td", { class: "num" + (net[a] === best && ms.length > 1 ? " best" : ""), text: (net[a] > 0 ? "+" : "") + net[a] })))));
      append(clear(box), [table]);
    };
    sel.addEventListener("change", render);
    // drawn right after the first paint, so the overview's tables show as fast as before; EXPLORER_WINS_MS marks it
    requestAnimationFrame(() => setTimeout(() => { render(); window.EXPLORER_WINS_MS = performance.now(); }, 0));
    return [el("h3", { text: "Who wins — " + ds.name + " (" + ds.questions.length + " questions)" }),
      el("div", { class: "note" }, "Each cell: questions where the row method's ", sel,
        " is higher / equal / lower than the column method's (wins / ties / losses, question by question), the mean per-question Δ (row − column) and n, the questions both ran. " +
        "Click a cell for those questions sorted by Δ. Rows marked \"too few\" have fewer than " + D.small_n + " questions: read them as examples, not results."),
      box];
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
      D.datasets.map(winsBlock),
      D.tables.map(paperTable),
      D.claims ? claimsBlock(D.claims) : null,
      D.cost ? [el("h3", { text: D.cost.title }), el("div", { class: "note", text: D.cost.file }), genericTable(D.cost, "cost")] : null,
      D.analyses.map((t, i) => el("details", { class: "analysis", open: t.rows.length <= 15 }, el("summary", null, el("b", { text: t.title }),
        el("span", { class: "note", text: "  " + t.file + " · " + t.rows.length + " rows" })), genericTable(t, "analysis-" + i))),
      D.figures.length || D.figure_notes.length ? [el("h3", { text: "Figures" }),
        D.figure_notes.length ? el("div", { class: "warn", id: "figure-notes", text: (D.figures.length ? "Left out of the figures (figures.md):\n"
          : "No figure could be drawn (figures.md):\n") + D.figure_notes.map((x) => "• " + x).join("\n") }) : null,
        el("div", { class: "figures" }, D.figures.map((f) => el("a", { href: f, target: "_blank" }, el("img", { src: f, alt: f, title: f }))))] : null,
      D.failures ? [el("h3", { text: "Failures" }), el("pre", { text: D.failures })] : null,
      el("h3", { text: "Provenance" }), D.runs.map(runDetails)]);
  }

  // -- questions ---------------------------------------------------------------------------------------------
  function ranksAt(c, k) { return c.g[String(k)] || c.g.final; }
  function hits(c, k) { return ranksAt(c, k).map((r) => r > 0 && r <= k); }
  function recall(row, c, k) {
    const ng = c && c.ng !== undefined ? c.ng : row.ng;  // c.ng: the run's own gold count (another corpus or questions file)
    if (!c || !ng) return null;
    let found = 0;  // hits(c, k) counted without building arrays (the win matrix reads every question of every run)
    for (const r of ranksAt(c, k)) if (r > 0 && r <= k) found += 1;
    return 100 * found / ng;
  }
  function findsMissed(row, a, b, k) {
    const ca = row.m[a], cb = row.m[b];
    if (!ca || !cb) return false;
    const ha = hits(ca, k), hb = hits(cb, k);
    return ha.some((h, i) => h && !hb[i]);
  }
  // One method's per-question value on a metric: "r" R@k (0-100), "em" / "f1" (stored as fractions, shown 0-100);
  // null when the method has no such value for the question (not run, or no QA).
  function metricValue(row, c, metric, k) {
    if (!c) return null;
    if (metric === "r") return recall(row, c, k);
    const x = c[metric];
    return x === null || x === undefined ? null : 100 * x;
  }
  // Each method's per-question values on one metric, computed once per (dataset, method, metric, k): the win/tie/loss
  // matrix and the pair line read 2 arrays per pair instead of recomputing recall per pair and question.
  const VALUES = new Map();
  function valuesOf(mi, metric, k) {
    const key = S.ds + "|" + mi + "|" + metric + "|" + k;
    let v = VALUES.get(key);
    if (!v) {
      v = dataset().questions.map((row) => metricValue(row, row.m[mi], metric, k));
      VALUES.set(key, v);
    }
    return v;
  }
  function pairDiff(row, a, b, metric, k) {
    if (a < 0 || b < 0 || unpairedWhy(dataset(), a, b)) return null;  // compare() refuses the pair: no Δ
    const va = metricValue(row, row.m[a], metric, k), vb = metricValue(row, row.m[b], metric, k);
    return va === null || vb === null ? null : va - vb;
  }
  // Win / tie / loss of method a against method b over the questions both have a value for (the paired comparison of
  // docs/evidence.md, question by question): a win is a larger value for a; |Δ| below 1e-9 is a tie.
  function winTieLoss(ds, a, b, metric, k, idx) {
    const out = { w: 0, t: 0, l: 0, n: 0, sum: 0, diffs: [] };
    const va = valuesOf(a, metric, k), vb = valuesOf(b, metric, k);
    const n = idx ? idx.length : va.length;
    for (let j = 0; j < n; j++) {
      const i = idx ? idx[j] : j;
      if (va[i] === null || vb[i] === null) continue;
      const d = va[i] - vb[i];
      out.n += 1; out.sum += d; out.diffs.push(d);
      if (d > 1e-9) out.w += 1; else if (d < -1e-9) out.l += 1; else out.t += 1;
    }
    return out;
  }
  function smallN(m) { return m.n !== undefined && m.n < D.small_n; }
  function errCount(row) { return row.m.filter((c) => c && c.err).length; }
  function matches(row, f) {
    if (f.type && row.type !== f.type) return false;
    if (f.err === "some" && !errCount(row)) return false;
    if (f.err === "none" && errCount(row)) return false;
    if (f.text) {
      const t = f.text.toLowerCase();
      if (!(row.id.toLowerCase().includes(t) || row.q.toLowerCase().includes(t) || row.ans.some((x) => String(x).toLowerCase().includes(t)))) return false;
    }
    if (f.a >= 0 && f.b >= 0 && f.a !== f.b) {
      if (f.mode === "a" && !findsMissed(row, f.a, f.b, f.k)) return false;
      if (f.mode === "b" && !findsMissed(row, f.b, f.a, f.k)) return false;
      if (f.mode === "either" && !findsMissed(row, f.a, f.b, f.k) && !findsMissed(row, f.b, f.a, f.k)) return false;
    }
    return true;
  }
  function sortKey(col, row, k) {
    if (col === "id") return row.id;
    if (col === "q") return row.q.toLowerCase();
    if (col === "type") return row.type;
    if (col === "ans") return String(row.ans[0] || "").toLowerCase();
    if (col === "ng") return row.ng;
    if (col === "err") return errCount(row);
    if (col === "diff") { const d = pairDiff(row, S.qf.a, S.qf.b, S.qf.dm, k); return d === null ? -Infinity : d; }
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
      const da = f.sort === "diff" && f.a >= 0 && f.b >= 0 ? valuesOf(f.a, f.dm, f.k) : null, db = da ? valuesOf(f.b, f.dm, f.k) : null;
      const keys = new Map(idx.map((i) => [i, da ? (da[i] === null || db[i] === null ? -Infinity : da[i] - db[i]) : sortKey(f.sort, ds.questions[i], f.k)]));
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
    // S.qf, not f: a later hash (a link, a bookmark) replaces the filter object while these controls stay
    const set = (key, val) => { S.qf[key] = val; S.qf.page = 1; history.replaceState(null, "", filterHash(S.qf)); renderQuestionTable(); };
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
    const mode = el("select", { id: "f-mode", onchange: () => set("mode", mode.value) },
      el("option", { value: "a", text: "A finds a gold passage B misses at k" }), el("option", { value: "b", text: "B finds a gold passage A misses at k" }),
      el("option", { value: "either", text: "either finds one the other misses" }), el("option", { value: "all", text: "all questions (compare A and B)" }));
    mode.value = f.mode;
    const dm = el("select", { id: "f-dm", onchange: () => set("dm", dm.value) }, el("option", { value: "r", text: "R@k" }),
      ds.methods.some((m) => m.qa) ? [el("option", { value: "em", text: "EM" }), el("option", { value: "f1", text: "F1" })] : null);
    dm.value = f.dm;
    const cols = el("select", { id: "f-cols", onchange: () => set("cols", cols.value) }, el("option", { value: "r", text: "R@k per method" }),
      el("option", { value: "all", text: "R@k, EM, F1 per method" }));
    cols.value = f.cols;
    const reset = el("button", { id: "f-reset", text: "reset", onclick: () => { S.qf = defaultFilter(ds); history.replaceState(null, "", filterHash(S.qf)); S.built.questions = null; showQuestions(new URLSearchParams()); } });
    append(clear(v), [el("h2", { text: "Questions — " + ds.name }),
      el("div", { class: "controls" }, datasetPicker((i) => { location.hash = "#questions?ds=" + i; }),
        el("label", null, "hop type ", type), el("label", null, "text ", text), el("label", null, "errors ", err),
        el("label", null, "k ", k), el("label", null, "columns ", cols), reset),
      el("div", { class: "controls" }, el("span", null, "method A ", a, " method B ", b, " questions: ", mode, " · Δ A − B of ", dm),
        el("span", { id: "q-pair", class: "small" })),
      el("div", { id: "q-hist" }),
      el("p", null, el("span", { id: "q-count", class: "count" }), el("span", { id: "q-total", class: "muted" }), " ",
        el("button", { id: "q-export-csv", text: "export CSV", title: "the filtered questions (all pages) as CSV: id, question, hop type, each shown method's values", onclick: () => download("csv") }),
        " ", el("button", { id: "q-export-jsonl", text: "export JSONL", title: "the filtered questions (all pages) as JSON Lines, one {id, question, type, answers} per line", onclick: () => download("jsonl") })),
      el("div", { class: "scroll" }, el("table", { id: "q-table" })),
      el("p", null, el("button", { id: "q-more", text: "show more", onclick: () => { S.qf.page += 1; renderQuestionTable(); } }))]);
  }
  function renderQuestionTable() {
    const ds = dataset(), f = S.qf;
    const idx = filtered();
    S.list = idx;
    document.getElementById("q-count").textContent = String(idx.length);
    document.getElementById("q-total").textContent = " of " + ds.questions.length + " questions match";
    const pair = f.a >= 0 && f.b >= 0 && f.a !== f.b && f.a < ds.methods.length && f.b < ds.methods.length;
    renderPair(pair);
    const dmLabel = f.dm === "r" ? "R@" + f.k : f.dm.toUpperCase();
    // methods A and B of the filter first; per method R@k, EM and F1 under one header
    const order = [f.a, f.b].filter((x) => x >= 0 && x < ds.methods.length);
    ds.methods.forEach((_, i) => { if (!order.includes(i)) order.push(i); });
    const sortTh = (key, label, extra) => el("th", Object.assign({
      class: f.sort === key ? (f.dir > 0 ? "sorted-asc" : "sorted-desc") : null, dataset: { col: key }, text: label,
      onclick: () => { if (f.sort === key) f.dir = -f.dir; else { f.sort = key; f.dir = key.startsWith("m") ? -1 : 1; }
        history.replaceState(null, "", filterHash(f)); renderQuestionTable(); } }, extra || {}));
    const base = [["id", "id"], ["q", "question"], ["type", "hop type"], ["ans", "gold answer"], ["ng", "gold"]];
    const qaCols = (m) => m.qa && (f.cols === "all" || !m.recall);  // EM/F1 columns: asked for, or a QA-only run
    if (pair) base.push(["diff", "Δ A−B " + dmLabel]);
    const head1 = el("tr", null, base.map(([key, label]) => sortTh(key, label, { rowspan: 2, title: key === "diff" ? ds.methods[f.a].label + " − " + ds.methods[f.b].label + ", per question" : null })),
      order.map((i) => el("th", { class: "mhead" + (smallN(ds.methods[i]) ? " smalln" : ""), colspan: (ds.methods[i].recall ? 1 : 0) + (qaCols(ds.methods[i]) ? 2 : 0),
        title: ds.methods[i].label + ": " + num(ds.methods[i].n) + " questions" + (smallN(ds.methods[i]) ? " (fewer than " + D.small_n + ": not a result)" : "") },
      (pair && i === f.a ? "A: " : pair && i === f.b ? "B: " : "") + ds.methods[i].label, el("span", { class: "muted small", text: " n=" + num(ds.methods[i].n) }))),
      sortTh("err", "errors", { rowspan: 2 }));
    const head2 = el("tr", null, order.map((i) => [ds.methods[i].recall ? sortTh("m" + i + ".r", "R@" + f.k) : null,
      qaCols(ds.methods[i]) ? [sortTh("m" + i + ".em", "EM"), sortTh("m" + i + ".f1", "F1")] : null]));
    const head = [head1, head2];
    const shown = idx.slice(0, f.page * PAGE);
    const rows = shown.map((i) => {
      const row = ds.questions[i];
      const cells = [el("td", null, el("a", { href: "#q?" + params({ ds: S.ds, i: i, a: f.a >= 0 ? f.a : 0, b: f.b >= 0 ? f.b : "" }), text: row.id })),
        el("td", { class: "qtext", text: row.q }), el("td", { text: row.type }),
        el("td", { class: "ans", text: row.ans.length ? row.ans[0] + (row.ans.length > 1 ? " (+" + (row.ans.length - 1) + ")" : "") : "–", title: row.ans.join(" | ") }),
        el("td", { class: "num", text: row.ng })];
      if (pair) {
        const dv = pairDiff(row, f.a, f.b, f.dm, f.k);
        cells.push(el("td", { class: "num diff" + (dv > 0 ? " pos" : dv < 0 ? " neg" : ""), text: dv === null ? "–" : (dv > 0 ? "+" : "") + num(dv, f.dm === "f1" ? 1 : 0) }));
      }
      order.forEach((j) => {
        const m = ds.methods[j], c = row.m[j];
        const r = recall(row, c, f.k);
        if (m.recall) {
          cells.push(el("td", { class: "num" + (r === 100 ? " r100" : r === 0 ? " r0" : ""), title: c && c.err ? c.err : null,
            text: c ? num(r, 0) + (c.err ? " !" : "") : "–" }));
        }
        if (qaCols(m)) {
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
  // The pair line (both directions of "finds a gold passage the other misses", win/tie/loss) and the histogram of the
  // per-question differences, over the questions the other filters (hop type, errors, text) keep.
  function renderPair(pair) {
    const ds = dataset(), f = S.qf;
    const box = document.getElementById("q-pair"), hist = document.getElementById("q-hist");
    clear(box); clear(hist);
    if (!pair) { append(box, [el("span", { class: "muted", text: "Choose methods A and B to compare them question by question." })]); return; }
    const why = unpairedWhy(ds, f.a, f.b);
    if (why) { append(box, [el("span", { id: "q-unpaired", class: "neg", text: why })]); return; }
    const all = Object.assign({}, f, { mode: "all" }), idx = [];
    let ab = 0, ba = 0;
    ds.questions.forEach((row, i) => {
      if (!matches(row, all)) return;
      idx.push(i);
      if (findsMissed(row, f.a, f.b, f.k)) ab += 1;
      if (findsMissed(row, f.b, f.a, f.k)) ba += 1;
    });
    const r = winTieLoss(ds, f.a, f.b, f.dm, f.k, idx);
    const la = ds.methods[f.a].label, lb = ds.methods[f.b].label, dmLabel = f.dm === "r" ? "R@" + f.k : f.dm.toUpperCase();
    const go = (mode) => el("a", { href: filterHash(Object.assign({}, f, { mode: mode })), onclick: (e) => { e.preventDefault(); f.mode = mode; f.page = 1;
      document.getElementById("f-mode").value = mode; history.replaceState(null, "", filterHash(f)); renderQuestionTable(); } });
    append(box, [append(go("a"), [el("b", { id: "q-n-ab", text: ab })]), " where " + la + " finds a gold passage " + lb + " misses · ",
      append(go("b"), [el("b", { id: "q-n-ba", text: ba })]), " the other way · " + dmLabel + " of A vs B: ",
      el("b", { id: "q-wtl", dataset: { w: r.w, t: r.t, l: r.l, n: r.n }, text: r.w + " higher / " + r.t + " equal / " + r.l + " lower" }),
      " of " + r.n + " questions, mean Δ " + (r.n ? (r.sum >= 0 ? "+" : "") + num(r.sum / r.n, 1) : "–"),
      smallN(ds.methods[f.a]) || smallN(ds.methods[f.b]) ? el("span", { class: "smallbadge", text: " (fewer than " + D.small_n + " questions: examples, not a result)" }) : null]);
    append(hist, [diffHistogram(r.diffs, "Per-question Δ " + dmLabel + " (A − B), n=" + r.n + " questions")]);
  }
  function diffHistogram(diffs, title) {
    if (!diffs.length) return null;
    const edges = [-100, -75, -50, -25, -1e-9, 1e-9, 25, 50, 75, 100.000001];  // the middle bin: Δ = 0 (a tie)
    const names = ["−100…−75", "−75…−50", "−50…−25", "−25…0", "0 (tie)", "0…25", "25…50", "50…75", "75…100"];
    const counts = names.map(() => 0);
    for (const d of diffs) {
      let j = edges.findIndex((e, i) => i > 0 && d < edges[i]) - 1;
      if (j < 0) j = names.length - 1;
      counts[Math.max(0, Math.min(names.length - 1, j))] += 1;
    }
    const W = 720, H = 140, L = 10, B = 28, bw = (W - L - 10) / names.length, top = Math.max(...counts);
    const g = sv("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, id: "q-hist-svg", role: "img" });
    append(g, [sv("text", { x: L, y: 12, "font-weight": 600 }, title)]);
    counts.forEach((c, i) => {
      const h = top ? (H - B - 34) * c / top : 0;
      const col = i < 4 ? "#b3261e" : i === 4 ? "#888" : "#1d7a3a";
      append(g, [sv("rect", { x: L + i * bw + 2, y: H - B - h, width: bw - 4, height: h, fill: col, "fill-opacity": 0.7, "data-count": c },
        sv("title", null, names[i] + ": " + c + " questions")),
      sv("text", { x: L + i * bw + bw / 2, y: H - B - h - 2, "text-anchor": "middle" }, c),
      sv("text", { x: L + i * bw + bw / 2, y: H - B + 14, "text-anchor": "middle" }, names[i])]);
    });
    return el("div", { class: "plot" }, g);
  }
  // The filtered questions (every page) as CSV or JSON Lines: to re-run them or read them elsewhere.
  function exportText(fmt) {
    const ds = dataset(), f = S.qf, idx = S.list || filtered();
    const rows = idx.map((i) => ds.questions[i]);
    // U+2028/U+2029 escaped: valid JSON either way, but a line splitter that treats them as line ends would cut a record
    if (fmt === "jsonl") return rows.map((r) => JSON.stringify({ id: r.id, question: r.q, type: r.type, answers: r.ans })
      .replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029")).join("\n") + (rows.length ? "\n" : "");
    const q = (x) => { const t = x === null || x === undefined ? "" : String(x); return /[",\n\r]/.test(t) ? '"' + t.replace(/"/g, '""') + '"' : t; };
    const ms = ds.methods.map((m, i) => i);
    const head = ["id", "question", "type", ...ms.flatMap((i) => [ds.methods[i].label + " R@" + f.k, ...(ds.methods[i].qa ? [ds.methods[i].label + " EM", ds.methods[i].label + " F1"] : [])])];
    const pair = f.a >= 0 && f.b >= 0 && f.a !== f.b;
    if (pair) head.push("delta A-B " + (f.dm === "r" ? "R@" + f.k : f.dm));
    const lines = [head.map(q).join(",")];
    for (const r of rows) {
      const vals = [r.id, r.q, r.type, ...ms.flatMap((i) => [metricValue(r, r.m[i], "r", f.k), ...(ds.methods[i].qa ? [metricValue(r, r.m[i], "em", f.k), metricValue(r, r.m[i], "f1", f.k)] : [])])];
      if (pair) vals.push(pairDiff(r, f.a, f.b, f.dm, f.k));
      lines.push(vals.map(q).join(","));
    }
    return lines.join("\n") + "\n";
  }
  window.EXPLORER_EXPORT = exportText;
  function download(fmt) {
    const blob = new Blob([exportText(fmt)], { type: fmt === "csv" ? "text/csv" : "application/x-ndjson" });
    const a = el("a", { href: URL.createObjectURL(blob), download: "questions_" + dataset().name + "." + fmt });
    document.body.appendChild(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 0);
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
      document.getElementById("f-mode").value = f.mode; document.getElementById("f-dm").value = f.dm; document.getElementById("f-cols").value = f.cols;
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
  // A question's timeline for one method: every LLM call as a bar from its start (ts − latency_s; ts is when the
  // ledger recorded it) to its end, in start order, over bands of the rounds; then the per-round step timings the
  // method recorded. Records without ts (older runs) are laid end to end.
  function stageColor(stage) {
    let h = 0;
    for (const ch of String(stage)) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    return COLORS[h % COLORS.length];
  }
  function timeline(M, side) {
    const calls = M.llm_calls.map((c, i) => ({ c: c, i: i }));
    if (!calls.length && !M.step_timings) return null;
    const hasTs = calls.length && calls.every((x) => typeof x.c.ts === "number");
    let t = 0;
    for (const x of calls) {
      const lat = Number(x.c.latency_s) || 0;
      if (hasTs) { x.start = x.c.ts - lat; x.end = x.c.ts; } else { x.start = t; x.end = t + lat; t = x.end; }
    }
    calls.sort((p, q) => p.start - q.start || p.i - q.i);
    // the question started total_s before its last call ended (the QA read is last); steps have durations only, so
    // round n's steps are laid from the end of round n-1's last call (round 1: the question's start)
    const total = Number(M.timings.total_s) || 0;
    const lastEnd = calls.length ? Math.max(...calls.map((x) => x.end)) : 0;
    const t0 = calls.length ? Math.min(calls[0].start, hasTs && total ? lastEnd - total : calls[0].start) : 0;
    const steps = (M.step_timings || []).map((st, j) => {
      const prev = calls.filter((x) => (x.c.round || 0) === j);
      let at = j === 0 || !prev.length ? t0 : Math.max(...prev.map((x) => x.end));
      return Object.entries(st || {}).filter(([, v]) => typeof v === "number").map(([key, v]) => {
        const seg = { key: key, start: at, end: at + v };
        at += v;
        return seg;
      });
    });
    const span = Math.max(1e-3, ...calls.map((x) => x.end - t0), ...steps.flat().map((x) => x.end - t0), total);
    const W = 900, L = 150, R = 130, row = 15, T = 22 + row * steps.length;
    const H = T + row * calls.length + 26;
    const X = (x) => L + (x - t0) / span * (W - L - R);
    const g = sv("svg", { width: "100%", viewBox: "0 0 " + W + " " + H, class: "timeline", id: "timeline-" + side, role: "img",
      preserveAspectRatio: "xMinYMin meet" });
    append(g, [sv("text", { x: 0, y: 13, "font-weight": 600 }, "Timeline: " + calls.length + " LLM calls, " + num(span, 2) + " s" +
      (M.timings.total_s !== undefined ? " (question total " + num(M.timings.total_s, 2) + " s)" : "") + (hasTs ? "" : " — no timestamps: calls laid end to end"))]);
    steps.forEach((segs, j) => {
      const y = 22 + row * j;
      append(g, [sv("text", { x: 0, y: y + 11, fill: "#687085" }, "steps · r" + (j + 1)), segs.map((seg) =>
        sv("rect", { class: "tl-step", x: X(seg.start), y: y + 2, width: Math.max(1, X(seg.end) - X(seg.start)), height: row - 4,
          fill: stageColor(seg.key), "fill-opacity": 0.55 }, sv("title", null, "round " + (j + 1) + " " + seg.key.replace(/_s$/, "") + ": " + num(seg.end - seg.start, 3) + " s"))),
      sv("text", { x: X(segs.length ? segs[segs.length - 1].end : t0) + 4, y: y + 11, fill: "#444" },
        segs.map((seg) => seg.key.replace(/_s$/, "") + " " + num(seg.end - seg.start, 2)).join(" · "))]);
    });
    const rounds = [...new Set(calls.map((x) => x.c.round || 0))];
    rounds.forEach((r, j) => {
      const mine = calls.filter((x) => (x.c.round || 0) === r);
      const a = Math.min(...mine.map((x) => x.start)), b = Math.max(...mine.map((x) => x.end));
      append(g, [sv("rect", { x: X(a), y: T - 2, width: Math.max(1, X(b) - X(a)), height: row * calls.length + 4, fill: j % 2 ? "#f3f5f9" : "#eaf0fa" }),
        X(b) - X(a) > 60 ? sv("text", { x: X(a) + 2, y: T + row * calls.length + 14, fill: "#687085" }, r ? "round " + r : "round 0 / answer") : null]);
    });
    calls.forEach((x, j) => {
      const y = T + row * j, c = x.c;
      const lat = Number(c.latency_s) || 0;
      append(g, [sv("g", { class: "tl-call", "data-stage": c.stage, "data-round": c.round === null || c.round === undefined ? "" : c.round,
        "data-latency": lat, "data-index": x.i },
      sv("text", { x: 0, y: y + 11 }, c.stage + (c.round ? " · r" + c.round : "") + (c.k ? " · k" + c.k : "")),
      sv("rect", { x: X(x.start), y: y + 2, width: Math.max(2, X(x.end) - X(x.start)), height: row - 4, fill: c.error ? "#b3261e" : stageColor(c.stage) },
        sv("title", null, c.stage + " round " + (c.round || 0) + ": " + num(lat, 3) + " s, " + (c.prompt_tokens || 0) + " prompt + " +
          (c.completion_tokens || 0) + " completion tokens" + (c.cached ? " (cached)" : "") + (c.error ? " — error: " + c.error : ""))),
      sv("text", { x: Math.max(X(x.end), X(x.start) + 2) + 4, y: y + 11, fill: "#444" }, num(lat, 2) + " s" + (c.cached ? " (cached)" : "")))]);
    });
    append(g, [sv("text", { x: L, y: H - 2, fill: "#687085" }, "0 s"), sv("text", { x: W - R, y: H - 2, "text-anchor": "end", fill: "#687085" }, num(span, 2) + " s")]);
    const stepTable = M.step_timings ? el("details", { class: "fold" }, el("summary", { text: "step timings per round (s)" }),
      kvTable(M.step_timings.map((st, j) => ["round " + (j + 1), Object.entries(st || {}).map(([kk, vv]) => kk + " " + num(vv, 3)).join(" · ")]))) : null;
    return el("div", { class: "block tl" }, el("h4", { text: "Timeline of the question (" + (hasTs ? "from the call records' timestamps" : "latencies only") + ")" }), g, stepTable);
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
    // the method's own view, timeline, calls and timings: inside the panel, or (side by side) full width below the
    // pair, where GEAR's wide round table has room
    const own = el("div", { class: "own", id: "own-" + side, dataset: { method: mi } });
    panel.own = own;
    append(own, M.sections.map((b) => block(V, b)));
    append(own, [timeline(M, side)]);
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
      append(own, [el("details", { class: "fold" },
        el("summary", { text: "LLM calls: " + calls.length + " (" + sum("prompt_tokens") + " prompt + " + sum("completion_tokens") + " completion tokens)" }),
        calls.some((c2) => c2.messages !== undefined) ? null
          : el("div", { class: "note", text: "Prompts are not stored in predictions.jsonl (run with llm.record_prompts=true to keep them); the replies are in the method's blocks above." }), table)]);
    }
    append(own, [el("details", { class: "fold" }, el("summary", { text: "timings" }), kvTable(Object.entries(M.timings).map(([kk, vv]) => [kk, typeof vv === "object" ? JSON.stringify(vv) : vv])))]);
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
      const panels = [a >= 0 ? methodPanel(Q, row, a, k, "a") : null, b >= 0 ? methodPanel(Q, row, b, k, "b") : null].filter(Boolean);
      const two = panels.length === 2;
      if (!two) for (const pn of panels) if (pn.own) pn.appendChild(pn.own);
      const pair = [el("div", { class: "pair" + (two ? " two" : "") }, panels),
        two ? panels.map((pn) => pn.own ? el("div", { class: "panel wide" }, el("h3", { text: ds.methods[parseInt(pn.dataset.method, 10)].label + ": its own view" }), pn.own) : null) : null];
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
    // a run with fewer than D.small_n questions starts hidden when a larger one shares the axes (click to show)
    const large = opts.series.some((s) => !(s.n < D.small_n));
    const hidden = new Set(large ? opts.series.filter((s) => s.n < D.small_n).map((s) => s.label) : []);
    const box = el("div", { class: "plot" });
    const render = () => {
      const shown = opts.series.filter((s) => !hidden.has(s.label));
      const W = 760, H = 350, L = 56, R = 14, T = 40, B = 40;
      const x0 = opts.xs[0], x1 = opts.xs[1] > x0 ? opts.xs[1] : x0 + 1;
      const ymax = opts.ymax || niceMax(Math.max(1e-9, ...shown.flatMap((s) => s.hi.concat(s.mean))));
      const fx = opts.logx ? Math.log : (x) => x;
      const X = (x) => L + (fx(x) - fx(x0)) / (fx(x1) - fx(x0)) * (W - L - R);
      const Y = (y) => T + (1 - Math.min(y, ymax) / ymax) * (H - T - B);
      const g = sv("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img" });
      const ns = [...new Set(shown.map((s) => s.n))].sort((p, q) => p - q);
      append(g, [sv("text", { x: L, y: 15, "font-weight": 600 }, opts.title),
        sv("text", { x: L, y: 30, class: "nline", fill: "#687085" }, "N=" + (ns.length ? ns.join("/") : "–") + " questions per shown run" +
          (ns.length && ns[ns.length - 1] < D.small_n ? " (examples only: fewer than " + D.small_n + " questions)" : ""))]);
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
      el("span", { class: "swatch", style: "background:" + COLORS[s.color] }), s.label + " (n=" + s.n + ")",
      s.n < D.small_n ? el("span", { class: "smallbadge", text: large ? " too few, hidden by default" : " too few" }) : null)));
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
    series.forEach((s, i) => { s.color = i % COLORS.length; s.hi = s.types.map((t) => t.hi); s.mean = s.types.map((t) => t.mean);
      s.n = s.types.reduce((a, t) => a + t.n, 0); });
    const labels = {};
    // each type's question count (the largest over the runs: runs on one question set have the same)
    types.forEach((t, i) => { labels[i] = t + " (n=" + Math.max(...series.map((s) => (s.types.find((x) => x.type === t) || { n: 0 }).n)) + ")"; });
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
    // a run whose largest evaluated k is not the dataset's is drawn at its own (run.ks without it): say so
    const atK = (list) => list.map((s) => s.k !== undefined && s.k !== k ? Object.assign({}, s, { label: s.label + " — its R@" + s.k + " (run.ks)" }) : s);
    append(clear(v), [el("h2", { text: "Plots — " + ds.name }), datasetPicker((i) => { location.hash = "#plots?ds=" + i; }),
      el("p", { class: "muted", text: "Shaded bands and bars: 95% percentile bootstrap intervals over questions (" + D.resamples +
        " resamples, seed " + D.seed + "), the tables' intervals. Hover a point for its numbers." }),
      lineChart("Recall@k for k = 1 … saved depth", P.curves, "k", "R@k", true),
      lineChart("R@" + k + " after each round (the list had the method stopped there; dashed: single-step)", atK(P.rounds), "round n", "R@" + k),
      typeChart("R@" + k + " by hop type", atK(P.types)),
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

// evalflow run viewer: three pages (runs, a run, a rollout) drawn from the
// JSON API. Stored text is only ever set as textContent, never as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const POLL_MS = 2000;
let pollTimer = null;
let routeSeq = 0;

// el builds an element: attrs are attributes (on* keys are listeners),
// children are nodes or strings (as text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  return fill(e, attrs, children);
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  return fill(e, attrs, children);
}

function fill(e, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function api(path) {
  const r = await fetch(path, { cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

const fmt = {
  usd: (v) => (v === undefined || v === null ? "" : "$" + Number(v).toFixed(4)),
  num: (v, d = 3) => (v === undefined || v === null ? "" : Number(v).toFixed(d).replace(/\.?0+$/, "") || "0"),
  time: (s) => (s ? new Date(s).toLocaleString() : ""),
  ms: (v) => (v >= 1000 ? (v / 1000).toFixed(2) + " s" : Math.round(v) + " ms"),
  ns: (v) => (v ? fmt.ms(v / 1e6) : ""),
  bytes: (v) => (v >= 1 << 20 ? (v / (1 << 20)).toFixed(1) + " MiB" : v >= 1024 ? (v / 1024).toFixed(1) + " KiB" : (v || 0) + " B"),
};

function badge(text, cls) {
  return el("span", { class: "badge " + (cls || text) }, text);
}

function runLink(id) {
  return "#/run/" + encodeURIComponent(id);
}

function rolloutLink(run, key) {
  return "#/rollout/" + encodeURIComponent(run) + "/" + encodeURIComponent(key);
}

function setLive(on) {
  document.getElementById("live").hidden = !on;
}

function schedule(fn) {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(fn, POLL_MS);
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
}

function showError(err) {
  show(el("p", { class: "error-box" }, "Error: " + err.message), el("p", {}, el("a", { href: "#/" }, "All runs")));
}

// ---- runs ----

async function runsPage(seq) {
  const rows = await api("api/runs");
  if (seq !== routeSeq) return;
  const live = rows.some((r) => r.state === "running");
  setLive(live);
  const table = el("table", { id: "runs-table" },
    el("thead", {}, el("tr", {},
      ["Run", "Kind", "Model", "Taskset", "State"].map((h) => el("th", {}, h)),
      ["Rollouts", "OK", "Failed", "Mean reward", "Cost"].map((h) => el("th", { class: "num" }, h)),
      el("th", {}, "Started"))),
    el("tbody", {}, rows.map((r) => el("tr", { "data-run": r.id },
      el("td", {}, el("a", { href: runLink(r.id) }, r.id)),
      el("td", {}, badge(r.kind, "kind")),
      el("td", {}, r.model || ""),
      el("td", {}, r.taskset || ""),
      el("td", {}, badge(r.state)),
      el("td", { class: "num" }, r.rollouts),
      el("td", { class: "num" }, r.ok),
      el("td", { class: "num failed" }, r.failed),
      el("td", { class: "num" }, fmt.num(r.mean_reward)),
      el("td", { class: "num cost" }, fmt.usd(r.cost_usd) + (r.unpriced_rollouts ? " + unknown" : "")),
      el("td", {}, fmt.time(r.started_at))))));
  show(el("h1", {}, "Runs"), rows.length ? table : el("p", { class: "muted" }, "No runs in this store yet."));
  schedule(() => route());
}

// ---- a run ----

const runState = { id: null, filters: { status: "", error_kind: "", min_reward: "", max_reward: "", q: "" }, sort: "key", offset: 0, limit: 50 };

async function runPage(seq, id) {
  if (runState.id !== id) {
    Object.assign(runState, { id, sort: "key", offset: 0, filters: { status: "", error_kind: "", min_reward: "", max_reward: "", q: "" } });
  }
  const run = await api("api/runs/" + encodeURIComponent(id));
  if (run.state === "waiting") return waitingPage(seq, run);
  if (run.kind === "sweep") return sweepPage(seq, run);
  const page = await api(rolloutsQuery(id));
  if (seq !== routeSeq) return;
  setLive(run.state === "running");
  const focused = document.activeElement && document.activeElement.id;
  show(
    el("p", {}, el("a", { href: "#/" }, "← All runs")),
    el("h1", {}, run.id, " ", badge(run.kind, "kind"), " ", badge(run.state)),
    runCards(run),
    progress(run),
    el("div", { class: "panels" },
      el("div", { class: "panel" }, el("h2", {}, "Reward distribution"), histogram(run.histogram)),
      el("div", { class: "panel" }, el("h2", {}, "pass@k"), passAtK(run)),
      el("div", { class: "panel" }, el("h2", {}, "Errors"), errorKinds(run)),
      run.kind === "train" ? el("div", { class: "panel" }, el("h2", {}, "Reward per epoch (mean ± std)"), epochPlot(run.epochs || [])) : null),
    el("h2", {}, "Rollouts"),
    filters(run),
    rolloutsTable(page),
    pager(page));
  if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
  if (run.state === "running") schedule(() => route());
}

// A run id under which nothing is stored yet: a run (a sweep) that has
// just started shows once its first rollout is stored.
function waitingPage(seq, run) {
  if (seq !== routeSeq) return;
  setLive(true);
  show(
    el("p", {}, el("a", { href: "#/" }, "← All runs")),
    el("h1", {}, run.id, " ", badge(run.state)),
    el("p", { class: "muted", id: "note" }, run.note),
    run.temporal_url ? el("p", {}, el("a", { href: run.temporal_url, target: "_blank", rel: "noopener" }, "Temporal UI")) : null);
  schedule(() => route());
}

// A sweep: its cells side by side, each linking to its own run.
function sweepPage(seq, run) {
  if (seq !== routeSeq) return;
  setLive(run.state === "running");
  const pass = (c) => c.pass_at_k.length ? c.pass_at_k.map((p) => "pass@" + p.k + " " + fmt.num(p.value)).join(", ") : "—";
  const errs = (c) => c.failed + (c.errors.length ? " (" + c.errors.map((e) => e.kind + " " + e.count).join(", ") + ")" : "");
  show(
    el("p", {}, el("a", { href: "#/" }, "← All runs")),
    el("h1", {}, run.id, " ", badge(run.kind, "kind"), " ", badge(run.state)),
    runCards(run),
    el("h2", {}, "Cells"),
    el("table", { id: "cells" },
      el("thead", {}, el("tr", {}, ["cell", "harness", "model", "state", "rollouts", "mean reward ± std", "pass@k", "errors", "tokens in/out", "cost", "wall time"].map((h) => el("th", {}, h)))),
      el("tbody", {}, run.cells.map((c) => el("tr", { "data-cell": c.name, class: c.error ? "error" : null },
        el("td", {}, el("a", { href: runLink(c.run_id) }, c.name)),
        el("td", { class: "harness" }, c.harness || "—"),
        el("td", { class: "model" }, c.model || "—"),
        el("td", {}, badge(c.error ? "failed" : c.state)),
        el("td", { class: "num rollouts" }, c.rollouts),
        el("td", { class: "num reward" }, fmt.num(c.mean_reward) + " ± " + fmt.num(c.std_reward)),
        el("td", { class: "pass" }, pass(c)),
        el("td", { class: "errors", title: c.error || "" }, errs(c)),
        el("td", { class: "num tokens" }, c.input_tokens + "/" + c.output_tokens),
        el("td", { class: "num cost" }, fmt.usd(c.cost_usd) + (c.unpriced_rollouts ? " + unknown" : "")),
        el("td", { class: "num wall" }, c.wall_time || "—"))))),
    run.audit ? auditSection(run.audit) : null);
  if (run.state === "running") schedule(() => route());
}

// An audit's findings: the tasks an adversary won without doing them, or
// got out of its sandbox from.
function auditSection(a) {
  const flagged = [...new Set(a.findings.map((f) => f.task))];
  return el("section", { id: "audit" },
    el("h2", {}, "Audit"),
    el("p", { class: "summary" }, flagged.length
      ? flagged.length + " of " + a.tasks.length + " tasks can be won without doing them, or let an adversary out of its sandbox"
      : "no adversary scored above 0 on any of " + a.tasks.length + " tasks or reached the worker's host"),
    flagged.length ? el("table", { id: "findings" },
      el("thead", {}, el("tr", {}, ["task", "adversary", "reward", "what it did"].map((h) => el("th", {}, h)))),
      el("tbody", {}, a.findings.map((f) => el("tr", { "data-task": f.task, "data-adversary": f.adversary },
        el("td", {}, f.task),
        el("td", {}, f.adversary),
        el("td", { class: "num reward" }, fmt.num(f.reward)),
        el("td", {}, f.did.join("; ") || "—"))))) : null);
}

function runCards(run) {
  const card = (l, v) => el("div", { class: "card" }, el("div", { class: "v" }, v), el("div", { class: "l" }, l));
  return el("div", { class: "cards" },
    card("model", run.model || "—"),
    card("taskset", run.taskset || "—"),
    card("rollouts", run.rollouts),
    card("ok", run.ok),
    card("failed", run.failed),
    card("mean reward", fmt.num(run.mean_reward) + " ± " + fmt.num(run.std_reward)),
    el("div", { class: "card", id: "run-cost" }, el("div", { class: "v" }, fmt.usd(run.cost_usd)),
      el("div", { class: "l" }, "cost" + (run.unpriced_rollouts ? " (unknown for " + run.unpriced_rollouts + " rollouts: a model without a price, or an answer without usage)" : ""))),
    run.stopped === "max_run_cost" ? card("stopped", "at --max-run-cost") : null,
    card("started", fmt.time(run.started_at) || "—"),
    run.temporal_url ? card("workflow", el("a", { href: run.temporal_url, target: "_blank", rel: "noopener" }, "Temporal UI")) : null);
}

function progress(run) {
  const total = run.rollouts || 1;
  return el("div", { style: null },
    el("h2", {}, "Progress"),
    el("div", { class: "bar", title: run.ok + " ok, " + run.failed + " failed" },
      el("div", { class: "ok", "data-w": run.ok / total }),
      el("div", { class: "err", "data-w": run.failed / total })),
    el("p", { class: "muted" }, run.rollouts + " rollouts stored" +
      (run.tasks ? " for " + run.tasks + " tasks" : "") + ": " + run.ok + " ok, " + run.failed + " failed" +
      (run.state === "running" ? " (updating)" : "")));
}

// Bars take their width from data-w after insertion: the page's CSP forbids
// inline style attributes, but not style set from script.
function sizeBars() {
  for (const d of document.querySelectorAll("[data-w]")) d.style.width = (100 * Number(d.dataset.w)).toFixed(2) + "%";
}

function histogram(bins) {
  if (!bins.length) return el("p", { class: "muted" }, "No rollouts yet.");
  const W = 360, H = 160, pad = 28;
  const max = Math.max(...bins.map((b) => b.count));
  const bw = (W - pad) / bins.length;
  const g = svg("svg", { id: "reward-histogram", width: W, height: H + 20, viewBox: `0 0 ${W} ${H + 20}` });
  g.append(svg("line", { x1: pad, y1: H, x2: W, y2: H, stroke: "#999" }));
  bins.forEach((b, i) => {
    const h = max ? ((H - 10) * b.count) / max : 0;
    const x = pad + i * bw;
    g.append(svg("rect", { class: "bin", x: x + 1, y: H - h, width: Math.max(bw - 2, 1), height: h, fill: "#0969da" },
      svg("title", {}, `${fmt.num(b.lo)}–${fmt.num(b.hi)}: ${b.count}`)));
    if (b.count) g.append(svg("text", { x: x + bw / 2, y: H - h - 2, "text-anchor": "middle" }, b.count));
  });
  g.append(svg("text", { x: pad, y: H + 14, "text-anchor": "middle" }, fmt.num(bins[0].lo, 2)));
  g.append(svg("text", { x: W - 4, y: H + 14, "text-anchor": "end" }, fmt.num(bins[bins.length - 1].hi, 2)));
  return g;
}

function passAtK(run) {
  if (!run.pass_at_k.length) return el("p", { class: "muted" }, "No task finished yet.");
  return el("table", { id: "pass-at-k" }, el("tbody", {}, run.pass_at_k.map((p) =>
    el("tr", {}, el("td", {}, "pass@" + p.k), el("td", { class: "num" }, fmt.num(p.value))))));
}

function errorKinds(run) {
  if (!run.errors.length) return el("p", { class: "muted" }, "No failed rollout.");
  return el("table", { id: "error-kinds" }, el("tbody", {}, run.errors.map((e) =>
    el("tr", {},
      el("td", {}, el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); setFilter({ status: "error", error_kind: e.kind }); } }, e.kind)),
      el("td", { class: "num" }, e.count)))));
}

function epochPlot(epochs) {
  if (!epochs.length) return el("p", { class: "muted" }, "No epoch yet.");
  const W = 420, H = 200, left = 40, bottom = 24, top = 10, right = 14;
  const lo = Math.min(0, ...epochs.map((e) => e.mean_reward - e.std_reward));
  const hi = Math.max(1, ...epochs.map((e) => e.mean_reward + e.std_reward));
  const x = (i) => left + (epochs.length === 1 ? (W - left - right) / 2 : (i * (W - left - right)) / (epochs.length - 1));
  const y = (v) => top + ((hi - v) * (H - top - bottom)) / (hi - lo || 1);
  const g = svg("svg", { id: "epoch-plot", width: W, height: H, viewBox: `0 0 ${W} ${H}` });
  g.append(svg("line", { x1: left, y1: H - bottom, x2: W - right, y2: H - bottom, stroke: "#999" }));
  g.append(svg("line", { x1: left, y1: top, x2: left, y2: H - bottom, stroke: "#999" }));
  for (const v of [lo, (lo + hi) / 2, hi]) {
    g.append(svg("text", { x: left - 4, y: y(v) + 4, "text-anchor": "end" }, fmt.num(v, 2)));
  }
  g.append(svg("polyline", { fill: "none", stroke: "#0969da", "stroke-width": 1.5,
    points: epochs.map((e, i) => `${x(i)},${y(e.mean_reward)}`).join(" ") }));
  epochs.forEach((e, i) => {
    g.append(svg("line", { class: "epoch-std", x1: x(i), x2: x(i), y1: y(e.mean_reward - e.std_reward), y2: y(e.mean_reward + e.std_reward), stroke: "#8c959f" }));
    g.append(svg("circle", { class: "epoch-point", "data-epoch": e.epoch, cx: x(i), cy: y(e.mean_reward), r: 4,
      fill: e.finished ? "#0969da" : "#fff", stroke: "#0969da" },
      svg("title", {}, `epoch ${e.epoch}: ${fmt.num(e.mean_reward)} ± ${fmt.num(e.std_reward)} over ${e.rollouts} rollouts` + (e.finished ? "" : " (running)"))));
    g.append(svg("text", { x: x(i), y: H - bottom + 14, "text-anchor": "middle" }, e.epoch));
  });
  return g;
}

function rolloutsQuery(id) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(runState.filters)) if (v !== "") q.set(k, v);
  q.set("sort", runState.sort);
  q.set("offset", runState.offset);
  q.set("limit", runState.limit);
  return "api/runs/" + encodeURIComponent(id) + "/rollouts?" + q;
}

function setFilter(change) {
  Object.assign(runState.filters, change);
  runState.offset = 0;
  route();
}

function filters(run) {
  const f = runState.filters;
  const kinds = run.errors.map((e) => e.kind);
  if (f.error_kind && !kinds.includes(f.error_kind)) kinds.push(f.error_kind);
  const input = (id, name, type, attrs) => el("input", Object.assign({ id, type, value: f[name],
    onchange: (ev) => setFilter({ [name]: ev.target.value }) }, attrs));
  return el("div", { class: "filters" },
    el("label", {}, "status", el("select", { id: "filter-status", onchange: (ev) => setFilter({ status: ev.target.value }) },
      ["", "ok", "error"].map((s) => el("option", { value: s, selected: f.status === s }, s || "any")))),
    el("label", {}, "error kind", el("select", { id: "filter-kind", onchange: (ev) => setFilter({ error_kind: ev.target.value }) },
      el("option", { value: "" }, "any"), kinds.map((k) => el("option", { value: k, selected: f.error_kind === k }, k)))),
    el("label", {}, "reward ≥", input("filter-min", "min_reward", "number", { step: "any" })),
    el("label", {}, "reward ≤", input("filter-max", "max_reward", "number", { step: "any" })),
    el("label", {}, "key or task", input("filter-q", "q", "search", { placeholder: "substring" })));
}

function rolloutsTable(page) {
  const col = (label, key, num) => {
    const active = runState.sort.replace(/^-/, "") === key;
    const arrow = active ? (runState.sort.startsWith("-") ? " ▼" : " ▲") : "";
    return el("th", { class: "sortable" + (num ? " num" : ""), "data-sort": key, onclick: () => {
      runState.sort = active && !runState.sort.startsWith("-") ? "-" + key : key;
      runState.offset = 0;
      route();
    } }, label + arrow);
  };
  return el("table", { id: "rollouts-table", "data-total": page.total },
    el("thead", {}, el("tr", {},
      col("Rollout", "key"), el("th", {}, "Task"), col("Status", "status"),
      col("Reward", "reward", true), col("Turns", "turns", true), el("th", { class: "num" }, "Tokens in/out"),
      el("th", { class: "num" }, "Cost"),
      col("Duration", "duration", true), col("Finished", "finished"))),
    el("tbody", {}, page.rows.map((r) => el("tr", { "data-key": r.key, class: "rollout-row " + r.status },
      el("td", {}, el("a", { href: rolloutLink(r.run_id, r.key) }, r.key)),
      el("td", {}, r.task_id),
      el("td", {}, badge(r.status === "ok" ? "ok" : "failed", r.status),
        r.status !== "ok" ? el("div", { class: "reason" }, (r.error_kind || "unknown") + (r.error ? ": " + r.error : "")) : null),
      el("td", { class: "num" }, fmt.num(r.reward)),
      el("td", { class: "num" }, r.turns),
      el("td", { class: "num" }, r.input_tokens + " / " + r.output_tokens),
      el("td", { class: "num cost" }, rolloutCost(r)),
      el("td", { class: "num" }, fmt.ms(r.duration_ms)),
      el("td", {}, fmt.time(r.finished_at))))));
}

// rolloutCost is a rollout's cost, or says it is unknown when one of its
// calls was of a model without a price.
function rolloutCost(r) {
  return r.unpriced_turns ? "unknown" : fmt.usd(r.cost_usd || 0);
}

function pager(page) {
  const last = Math.min(page.offset + page.rows.length, page.total);
  const go = (offset) => () => { runState.offset = Math.max(0, offset); route(); };
  return el("div", { class: "pager" },
    el("button", { id: "page-prev", disabled: page.offset === 0, onclick: go(page.offset - page.limit) }, "← Previous"),
    el("span", { id: "page-info" }, page.total ? `${page.offset + 1}–${last} of ${page.total}` : "no rollout matches"),
    el("button", { id: "page-next", disabled: last >= page.total, onclick: go(page.offset + page.limit) }, "Next →"));
}

// ---- a rollout ----

async function rolloutPage(seq, run, key) {
  const r = await api("api/runs/" + encodeURIComponent(run) + "/rollout?key=" + encodeURIComponent(key));
  if (seq !== routeSeq) return;
  setLive(false);
  const rec = r.record;
  const kv = (pairs) => el("dl", { class: "kv" }, pairs.filter((p) => p[1] !== undefined && p[1] !== null && p[1] !== "").map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  const metrics = Object.entries(rec.metrics || {}).sort(([a], [b]) => a.localeCompare(b));
  show(
    el("p", {}, el("a", { href: runLink(run) }, "← Run " + run)),
    el("h1", {}, rec.key, " ", badge(rec.status === "ok" ? "ok" : "failed", rec.status)),
    kv([
      ["task", rec.task_id],
      ["status", rec.status],
      ["error", rec.status !== "ok" ? el("span", { id: "rollout-error", class: "reason" }, (rec.error_kind || "unknown") + (rec.error ? ": " + rec.error : "")) : ""],
      ["reward", fmt.num(rec.reward)],
      ["turns", rec.turns],
      ["tokens", rec.input_tokens + " in, " + rec.output_tokens + " out"],
      ["cost", el("span", { id: "rollout-cost" }, rolloutCost(rec) + (rec.unpriced_turns ? " (" + rec.unpriced_turns + " calls of a model without a price, or answered without usage)" : ""))],
      ["duration", fmt.ms(rec.duration_ms)],
      ["model", rec.model],
      ["attempt", rec.attempt],
      ["finished", fmt.time(rec.finished_at)],
      ["workflow", r.temporal_url ? el("a", { id: "temporal-link", href: r.temporal_url, target: "_blank", rel: "noopener" }, "open in the Temporal UI") : ""],
    ]),
    metrics.length ? [el("h2", {}, "Metrics"), el("table", { id: "metrics" }, el("tbody", {}, metrics.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, fmt.num(v))))))] : null,
    el("h2", {}, "Attempts (" + r.attempts.length + ")"),
    r.attempts.length ? r.attempts.map((a) => attempt(a, rec)) : el("p", { class: "muted" }, "No trace stored for this rollout."));
}

function attempt(a, rec) {
  const final = a.attempt === rec.attempt;
  const h = a.harness || {};
  const turns = a.turns || [];
  const label = "Attempt " + a.attempt + (final ? " (the record's)" : "") + (a.error ? " — failed: " + a.error : "") +
    " · " + turns.length + " turns";
  return el("details", { class: "attempt", open: final, "data-attempt": a.attempt },
    el("summary", {}, label),
    a.error ? el("p", { class: "error-box" }, a.error) : null,
    el("h2", {}, "Transcript"),
    turns.length ? turns.map((t, i) => turn(t, i > 0 ? turns[i - 1] : null)) : el("p", { class: "muted" }, "No model call."),
    el("h2", {}, "Harness"),
    el("dl", { class: "kv" },
      el("dt", {}, "exit code"), el("dd", { class: "exit-code" }, String(h.exit_code ?? "")),
      h.timed_out ? [el("dt", {}, "timed out"), el("dd", {}, "yes")] : null,
      el("dt", {}, "duration"), el("dd", {}, fmt.ns(h.duration_ns)),
      h.answer ? [el("dt", {}, "answer"), el("dd", {}, h.answer)] : null),
    h.stdout_tail ? [el("div", { class: "muted" }, "stdout (tail)"), el("pre", { class: "stdout" }, h.stdout_tail)] : null,
    h.stderr_tail ? [el("div", { class: "muted" }, "stderr (tail)"), el("pre", { class: "stderr" }, h.stderr_tail)] : null,
    a.workspace_notes && a.workspace_notes.length ? [el("h2", {}, "Notes"), el("ul", { class: "notes" }, a.workspace_notes.map((n) => el("li", {}, n)))] : null,
    a.steps && a.steps.length ? [el("h2", {}, "Steps"), steps(a.steps)] : null,
    a.artifacts && a.artifacts.length ? [el("h2", {}, "Artifacts (" + (a.artifacts.length + (a.artifacts_unlisted || 0)) + ")"), artifacts(a)] : null,
    a.score_detail ? [el("h2", {}, "Verifier / score"), el("pre", { class: "score" }, a.score_detail)] : null);
}

// steps is a multi-step task's steps that ran: each one's reward, the
// turns made by its end, and whether it stopped the rollout.
function steps(list) {
  return el("table", { class: "steps" },
    el("thead", {}, el("tr", {}, el("th", {}, "step"), el("th", {}, "reward"), el("th", {}, "turns"), el("th", {}, ""))),
    el("tbody", {}, list.map((s) => {
      const v = s.verifier || {};
      const notes = [v.error, s.uncounted ? "gate only" : "", s.stopped ? "below its min_reward: the rollout stopped here" : ""].filter(Boolean).join("; ");
      return el("tr", { class: "step", "data-step": s.name },
        el("td", {}, s.name), el("td", { class: "num" }, fmt.num(v.reward)), el("td", { class: "num" }, String(s.turns)), el("td", {}, notes));
    })));
}

// artifacts is what the agent and the verifier left in /logs/artifacts: a
// picture shown, text and JSON in a <pre>, anything else (or a file whose
// content the trace does not hold) by its name and size.
function artifacts(a) {
  return el("div", { class: "artifacts" },
    a.artifacts.map(artifact),
    a.artifacts_unlisted ? el("p", { class: "muted" }, a.artifacts_unlisted + " more files, not listed") : null);
}

const PICTURES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

function artifact(f) {
  const type = (f.media_type || "").split(";")[0].trim();
  let kind = "file";
  if (f.content && f.encoding === "base64" && PICTURES.includes(type)) kind = "image";
  else if (f.content && f.encoding === "text") kind = "text";
  const about = [fmt.bytes(f.size), f.media_type, f.omitted ? "content not kept: " + f.omitted : ""].filter(Boolean).join(" · ");
  let body = null;
  if (kind === "image") {
    body = el("img", {
      class: "artifact-image", alt: f.path, src: "data:" + type + ";base64," + f.content,
      onload: (e) => e.target.setAttribute("data-loaded", ""),
      onerror: (e) => e.target.replaceWith(el("div", { class: "muted" }, "not a picture this browser shows")),
    });
  } else if (kind === "text") {
    body = el("pre", { class: "artifact-text" }, type === "application/json" ? prettyJSON(f.content) : f.content);
  }
  return el("div", { class: "artifact", "data-path": f.path, "data-kind": kind },
    el("div", { class: "head" }, el("span", { class: "name" }, f.path), " ", el("span", { class: "muted" }, about)),
    body);
}

function turn(t, prev) {
  const req = (t.request && t.request.messages) || [];
  // A turn's request repeats the conversation; show only what is new since
  // the previous turn's request and answer.
  let from = 0;
  if (prev && prev.request && prev.request.messages && req.length > prev.request.messages.length) {
    from = prev.request.messages.length + 1;
  }
  const u = (t.response && t.response.usage) || {};
  const head = [
    "Turn " + (t.index + 1),
    t.dialect + " " + (t.route || ""),
    t.provider ? "provider " + t.provider + (t.fallback_from && t.fallback_from.length ? " (fell back from " + t.fallback_from.join(", ") + ")" : "") : "",
    "HTTP " + t.status,
    "latency " + fmt.ns(t.latency_ns),
    t.ttft_ns ? "TTFT " + fmt.ns(t.ttft_ns) : "",
    "tokens " + (u.input_tokens || 0) + " in / " + (u.output_tokens || 0) + " out" + (u.reasoning_tokens ? " (" + u.reasoning_tokens + " reasoning)" : ""),
    t.cost_usd !== undefined && t.cost_usd !== null ? fmt.usd(t.cost_usd) : "",
    t.limit ? "limit: " + t.limit : "",
    t.streamed ? "streamed" : "",
    t.attempts > 1 ? t.attempts + " upstream attempts" : "",
    t.upstream_failure ? "provider failed: " + t.upstream_failure : "",
  ].filter(Boolean).join(" · ");
  return el("div", { class: "turn", "data-turn": t.index },
    el("div", { class: "head" }, head),
    el("div", { class: "body" },
      req.slice(Math.min(from, req.length)).map(message),
      t.response && t.response.message && (t.response.message.content || t.response.message.tool_calls || t.response.message.reasoning) ?
        message(Object.assign({ role: "assistant" }, t.response.message)) : null,
      t.response && t.response.finish_reason ? el("div", { class: "muted" }, "finish: " + t.response.finish_reason) : null,
      t.error ? el("div", { class: "error-box" }, "error: " + t.error) : null));
}

function message(m) {
  const text = (m.content || []).map((p) => (p.type === "text" || p.text ? p.text : "[" + p.type + "]")).join("\n");
  const thinking = (m.thinking || []).map((th) => th.text).filter(Boolean).join("\n");
  return el("div", { class: "msg " + m.role },
    el("div", { class: "role" }, m.role + (m.tool_call_id ? " (result of " + m.tool_call_id + ")" : "") + (m.name ? " " + m.name : "")),
    m.reasoning || thinking ? el("pre", { class: "reasoning" }, [m.reasoning, thinking].filter(Boolean).join("\n")) : null,
    text ? el("pre", { class: "content" }, text) : null,
    m.refusal ? el("pre", { class: "error-box" }, "refusal: " + m.refusal) : null,
    (m.tool_calls || []).map((c) => el("div", { class: "tool-call", "data-tool": c.name },
      el("span", { class: "name" }, c.name), " ", el("span", { class: "muted" }, c.id || ""),
      el("pre", { class: "arguments" }, prettyJSON(c.arguments)))));
}

function prettyJSON(s) {
  try {
    return JSON.stringify(JSON.parse(s), null, 2);
  } catch (e) {
    return s || "";
  }
}

// ---- routing ----

async function route() {
  clearTimeout(pollTimer);
  const seq = ++routeSeq;
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "run" && parts[1]) await runPage(seq, parts[1]);
    else if (parts[0] === "rollout" && parts[1] && parts[2]) await rolloutPage(seq, parts[1], parts.slice(2).join("/"));
    else await runsPage(seq);
    sizeBars();
  } catch (err) {
    if (seq === routeSeq) showError(err);
  }
}

window.addEventListener("hashchange", route);
route();

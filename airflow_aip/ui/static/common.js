"use strict";
// Shared by the three pages. Data enters the DOM through textContent and setAttribute only,
// never innerHTML: job ids, hyperparameters and error messages are user-controlled text.

// Text wraps where people expect: after "_", "-" and "/" between word characters (a <wbr> there),
// never inside a word (the pages' CSS breaks a word only when a segment alone is wider than the page).
// JOB_STATE_SUCCEEDED wraps as "JOB_STATE_ / SUCCEEDED", aip_training_pipeline as "aip_training_ / pipeline".
// A run of more than 16 word characters (a hash, a 60-digit ID) is no word: it may break every
// 16 characters, so that a table still fits the page. A URI cut with an ellipsis keeps its line.
const BREAK_AFTER = new RegExp(String.raw`(?<=[^\W_])[_/-](?=[^\W_])|[^\W_]{16}(?=[^\W_])`, "g");
const NO_BREAKS = new Set(["OPTION", "TEXTAREA", "TITLE", "SCRIPT", "STYLE"]);
function breakable(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(BREAK_AFTER)) {
    const end = m.index + m[0].length;
    out.push(text.slice(last, end), document.createElement("wbr"));
    last = end;
  }
  out.push(text.slice(last));
  return out;
}

const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  for (const c of children) {
    if (c instanceof Node) e.append(c);
    else if (NO_BREAKS.has(e.tagName) || /\buri\b/.test(attrs.class ?? "")) e.append(String(c ?? ""));
    else e.append(...breakable(String(c ?? "")));
  }
  return e;
};

const svgEl = (tag, attrs = {}, text) => {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
};

// Every number on every page (metrics, hyperparameters, differences, chart ticks) is written one
// way: 4 significant digits, fixed notation from 1e-4 up to 1e6, scientific outside, trailing zeros
// dropped (34.63, 0.0001204, 1.235e6). The console's pages use the same algorithm in Python
// (airflow_aip/jobs/numbers.py); both are tested on one table of cases. Text that is no number
// (a categorical hyperparameter) is shown as it is.
const metricText = (x) => {
  if (x === null || x === undefined || x === "") return "—";
  if (typeof x === "boolean") return String(x);
  const n = Number(x);
  if (typeof x === "string" && (x.trim() === "" || Number.isNaN(n))) return x;
  if (!Number.isFinite(n)) return String(n);
  if (n === 0) return "0";
  const [mantissa, power] = Math.abs(n).toExponential(3).split("e");
  const e = Number(power), digits = mantissa.replace(".", ""), sign = n < 0 ? "-" : "";
  const trim = (t) => (t.includes(".") ? t.replace(/\.?0+$/, "") : t);
  if (e < -4 || e >= 6) return `${sign}${trim(mantissa)}e${e}`;
  if (e < 0) return sign + trim("0." + "0".repeat(-e - 1) + digits);
  if (e >= 3) return sign + digits + "0".repeat(e - 3);
  return sign + trim(digits.slice(0, e + 1) + "." + digits.slice(e + 1));
};

// One number of decimals in a column: each value as metricText writes it, then padded with zeros
// to the most decimals a plain value of the column has ("1.0000" beside "0.9778", not "1").
function alignedTexts(values) {
  const texts = values.map(metricText);
  const plain = (t) => /^-?\d+(\.\d+)?$/.test(t);
  const places = Math.max(0, ...texts.filter(plain).map((t) => (t.split(".")[1] ?? "").length));
  return texts.map((t) => {
    if (!places || !plain(t)) return t;
    const [whole, part = ""] = t.split(".");
    return `${whole}.${part.padEnd(places, "0")}`;
  });
}

// A difference: its sign always written (+0.02222, -1.5, 0).
const signedText = (x) => {
  const t = metricText(x);
  return /^\d/.test(t) && t !== "0" ? "+" + t : t;
};

// What a job came to (ui/results.py), the same words on every page: its best trial, a single
// job's final metric, or a dash and the reason there is no number.
const resultText = (r) => {
  if (!r) return "—";
  const metric = r.metric || "metric";
  if (r.kind === "trial") return `trial ${r.trial_id}: ${metric} ${metricText(r.value)}`;
  if (r.kind === "metric") return `${metric} ${metricText(r.value)}` + (r.source === "evaluation" ? " (the champion, scored on this run's data)" : "");
  return `— (${r.reason})`;
};

// "1 job", "2 jobs": a count and its noun, singular or plural.
const counted = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

const when = (iso) => (iso ? new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC") : "—");

const seconds = (s) => (s === null || s === undefined ? "—" : s < 90 ? `${s.toFixed(1)} s` : `${(s / 60).toFixed(1)} min`);

const params = () => new URLSearchParams(location.search);

// A failure that may pass by itself: no answer (the network, or none in ANSWER_WITHIN_MS), or a
// 5xx while the API server is busy or restarting. The page tries again instead of staying blank.
class Transient extends Error {}
const ANSWER_WITHIN_MS = 30_000;

// Each page is {prefix}/ui/<page>; its data is {prefix}/api/<page>.
async function getJson(path, query) {
  let r;
  try {
    r = await fetch(`../api/${path}?${query}`, {
      credentials: "same-origin", headers: { Accept: "application/json" }, signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
    });
  } catch (e) {
    throw new Transient(e.name === "TimeoutError" ? `The server did not answer in ${ANSWER_WITHIN_MS / 1000} s.` : "The server could not be reached.");
  }
  if (r.status === 401) throw new Error("You are not logged in to Airflow.");
  if (r.status === 403) throw new Error("You may not read this Dag's XComs.");
  if (r.status >= 500) throw new Transient(`The server answered ${r.status}.`);
  if (!r.ok) throw new Error(`The server answered ${r.status}.`);
  return r.json();
}

// The task tab's URL for a job, inside this iframe (its sandbox allows no top-level navigation).
const taskPage = (j) => "task?" + new URLSearchParams({ dag_id: j.dag_id, run_id: j.run_id, task_id: j.task_id, map_index: j.map_index });

// Airflow frames the pages in an iframe whose sandbox has no allow-popups: there a target="_blank"
// link opens nothing at all. The frame is same-origin with Airflow's page, so the link is clicked
// from that page instead: a new tab, on the user's own click. Outside a frame it works as it is.
function openInNewTab(event) {
  if (window.top === window) return;
  try {
    const host = window.top.document;
    const a = host.createElement("a");
    Object.assign(a, { href: event.currentTarget.href, target: "_blank", rel: "noopener" });
    host.body.append(a);
    a.click();
    a.remove();
    event.preventDefault();
  } catch {
    // Airflow's page is out of reach (another origin): the link is left to the browser
  }
}

// A link out of the plugin: always a new browser tab, never inside the plugin's frame. The label
// says where it goes; the URL is the link's title (on hover), not printed after every label.
const outLink = (url, label) => {
  const a = el("a", { href: url, target: "_blank", rel: "noopener", title: url }, label);
  a.addEventListener("click", openInNewTab);
  return a;
};
const external = (label, url) => (url ? el("li", {}, outLink(url, label)) : null);

// Copied from a button's click: the Clipboard API when the frame may use it, else a selected
// textarea and execCommand (Airflow's iframe is given no clipboard-write permission).
async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return;
  } catch {
    // no clipboard permission in this frame: the old way below
  }
  const area = el("textarea", { class: "visually-hidden", readonly: "" });
  area.value = text;
  document.body.append(area);
  area.select();
  document.execCommand("copy");
  area.remove();
}

// A long URI or resource name: cut with an ellipsis to fit the page, the whole value on hover
// (its title) and a button that copies it.
function uriText(value, cls) {
  const box = el("span", { class: `uri-box ${cls ?? ""}`.trim() });
  const text = el("span", { class: "uri", title: value }, value);
  const copy = el("button", { type: "button", class: "copy", title: `Copy ${value}`, "aria-label": `Copy ${value}` }, "Copy");
  copy.addEventListener("click", async () => {
    await copyText(value);
    copy.textContent = "Copied";
  });
  box.append(text, copy);
  return box;
}

// Airflow's own page of a task instance (Airflow 3 UI URLs), from inside /aip/ui/<page>.
const airflowPage = (j, level = "task") => {
  const enc = encodeURIComponent;
  let url = `../../dags/${enc(j.dag_id)}`;
  if (level === "dag") return url;
  url += `/runs/${enc(j.run_id)}`;
  if (level === "run") return url;
  url += `/tasks/${enc(j.task_id)}`;
  return j.map_index >= 0 ? `${url}/mapped/${j.map_index}` : url;
};

// The run's new model against the champion (run and task tabs): metrics, verdict, and why.
function championText(c) {
  if (c.verdict) return c.verdict;  // the gate's sentence: both metrics, the data, the outcome
  const tag = c.metric_tag || "metric";
  const against = c.champion_metric === null || c.champion_metric === undefined
    ? ", with no champion to compare with"
    : ` against champion ${metricText(c.champion_metric)}${c.champion_version ? ` (version ${c.champion_version})` : ""}` +
      (c.difference !== null && c.difference !== undefined ? `, ${c.difference >= 0 ? "+" : ""}${metricText(c.difference)}` : "");
  return `New ${tag} ${metricText(c.metric)}${against}: ${c.promoted ? "promoted" : "not promoted"}` + (c.reason ? ` — ${c.reason}` : "");
}

function championBlock(c) {
  const box = el("section", { class: "champion", "data-promoted": c.promoted ? "true" : "false" },
                 el("h2", {}, "Champion comparison"), el("p", { class: "champion-verdict" }, championText(c)));
  if (c.same_eval_data !== null && c.same_eval_data !== undefined) box.dataset.sameData = String(c.same_eval_data);
  if (c.promoted_what) box.append(el("p", { class: "champion-promoted" }, c.promoted_what));
  else if (c.model) box.append(el("p", { class: "muted" }, `Model ${c.model}, version ${c.version_id ?? "—"}`));
  const link = external(c.console_label, c.console_url);
  if (link) box.append(el("ul", { class: "links" }, link));
  return box;
}

function stateText(state) {
  return el("span", { class: `state state-${state ?? "none"}` }, state ?? "—");
}

// A table whose columns sort on click (keyboard too: the headers are buttons); aria-sort says how.
function sortableTable(caption, columns, rows, rowAttrs) {
  const table = el("table", { class: "sortable" }, el("caption", {}, caption));
  const headRow = el("tr");
  table.append(el("thead", {}, headRow));
  const body = el("tbody");
  table.append(body);
  const draw = (order) => {
    body.replaceChildren(...order.map((r) => {
      const tr = el("tr", rowAttrs(r));
      for (const c of columns) tr.append(el("td", { class: c.numeric ? "num" : c.cls }, c.cell(r)));
      return tr;
    }));
  };
  columns.forEach((c) => {
    const th = el("th", { scope: "col", "aria-sort": "none" });
    const button = el("button", { type: "button" }, c.label);
    button.addEventListener("click", () => {
      const ascending = th.getAttribute("aria-sort") !== "ascending";
      for (const other of headRow.children) other.setAttribute("aria-sort", "none");
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const key = c.sort ?? c.cell;
      const sorted = [...rows].sort((a, b) => {
        const x = key(a), y = key(b);
        if (x === null || x === undefined || x === "—") return 1;
        if (y === null || y === undefined || y === "—") return -1;
        const cmp = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true });
        return ascending ? cmp : -cmp;
      });
      draw(sorted);
    });
    th.append(button);
    headRow.append(th);
  });
  draw(rows);
  return table;
}

async function render(load, draw) {
  const status = document.getElementById("status");
  for (let wait = 2; ; wait = Math.min(2 * wait, 30)) {
    try {
      const data = await load();
      status.textContent = "";
      draw(data, document.getElementById("content"), status);
      return;
    } catch (e) {
      if (!(e instanceof Transient)) {
        status.textContent = e.message;
        return;
      }
      status.textContent = `${e.message} Trying again in ${wait} s…`;
      await new Promise((done) => setTimeout(done, wait * 1000));
    }
  }
}

// A POST from this page: the custom header is the server's CSRF guard (a cross-site form cannot send it).
async function postJson(path, query) {
  const r = await fetch(`../api/${path}?${query}`, {
    method: "POST", credentials: "same-origin", headers: { Accept: "application/json", "X-Requested-With": "aip" },
  });
  if (r.status === 401) throw new Error("You are not logged in to Airflow.");
  if (r.status === 403) throw new Error("You may not edit this Dag's task instances.");
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    throw new Error(typeof body.detail === "string" ? body.detail : `The server answered ${r.status}.`);
  }
  return r.json();
}

// render(), fetched again while draw() returns a number of seconds: the page follows a running
// job without a reload. Each draw builds the content apart, then swaps it in at once (no flicker);
// an answer overtaken by a newer fetch (a refresh asked for after a cancel) is dropped.
function renderLive(load, draw) {
  const status = document.getElementById("status");
  const out = document.getElementById("content");
  let timer = null, generation = 0, again = null;
  const refresh = async () => {
    clearTimeout(timer);
    const mine = ++generation;
    try {
      const data = await load();
      if (mine !== generation) return;
      status.textContent = "";
      const fresh = el("div");
      again = draw(data, fresh, refresh) || null;
      const focused = document.activeElement?.id;  // keyboard users keep their place
      out.replaceChildren(...fresh.childNodes);
      if (focused) document.getElementById(focused)?.focus();
    } catch (e) {
      if (mine !== generation) return;
      if (!again && e instanceof Transient) again = 5;  // a first load that failed on the way
      status.textContent = e.message + (again ? " Trying again…" : "");
    }
    if (again) timer = setTimeout(refresh, again * 1000);
  };
  return refresh();
}

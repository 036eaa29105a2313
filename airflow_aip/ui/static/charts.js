"use strict";
// The two charts of the task tab, as plain SVG. Every point carries its values as text (a <title>
// for pointer users, an aria-label for screen readers), so the chart is never the only source.

const W = 420, H = 220, L = 60, R = 14, T = 14, B = 40;

const better = (goal) => (goal === "MINIMIZE" ? (a, b) => a < b : (a, b) => a > b);
const losing = new Set(["FAILED", "CANCELLED", "CANCELLING"]);

// Best objective among the trials so far, trial by trial (in the job's order); null before the first.
function bestSoFar(job) {
  const isBetter = better(job.goal);
  let best = null;
  return job.trials.map((t) => {
    if (t.objective !== null && !losing.has(t.state) && (best === null || isBetter(t.objective, best))) best = t.objective;
    return best;
  });
}

function scale(lo, hi, from, to, log) {
  const f = log ? Math.log10 : (v) => v;
  let a = f(lo), b = f(hi);
  if (a === b) { a -= 1; b += 1; }
  return (v) => from + ((f(v) - a) * (to - from)) / (b - a);
}

function ticks(lo, hi, log) {
  if (log) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(10 ** e);
    return out.filter((v) => v >= lo / 10 && v <= hi * 10);
  }
  if (lo === hi) return [lo];
  // Round values a reader can place (0.85, 0.9, 0.95), not the data's minimum, middle and maximum:
  // a step of 1, 2 or 5 times a power of ten, giving 2 to 6 ticks inside the range.
  const rough = (hi - lo) / 5, power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
  const out = [];
  for (let k = Math.ceil(lo / step); k * step <= hi + step * 1e-9; k++) out.push(Number((k * step).toPrecision(12)));
  return out.length >= 2 ? out : [lo, hi];
}

function frame(label, xLabel, yLabel) {
  const root = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "group", "aria-label": label });
  root.append(svgEl("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
              svgEl("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
              svgEl("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, xLabel),
              svgEl("text", { x: 12, y: (T + H - B) / 2, transform: `rotate(-90 12 ${(T + H - B) / 2})`, "text-anchor": "middle" }, yLabel));
  return root;
}

function yAxis(root, lo, hi, y) {
  for (const v of ticks(lo, hi, false)) {
    root.append(svgEl("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }),
                svgEl("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, metricText(v)));
  }
}

// A trial's name in a chart: its ID, and its rung's when the study spans several jobs.
const trialName = (job, t) => (job.several_jobs ? `${t.rung || "this job"} ${t.id}` : t.id);

function point(job, t, cx, cy, label) {
  const best = t.key === job.best_trial_key;
  const g = svgEl("g", { role: "img", "aria-label": label });
  const c = svgEl("circle", { class: best ? "trial best" : "trial", cx, cy, r: best ? 7 : 4.5, "data-trial": t.id, "data-objective": t.objective });
  c.append(svgEl("title", {}, label));
  g.append(c);
  return g;
}

function objectiveRange(scored) {
  const ys = scored.map((t) => t.objective);
  return [Math.min(...ys), Math.max(...ys)];
}

// Metric per trial, in the order the trials ran, with the best-so-far line.
function metricPerTrial(job) {
  const metric = job.metric || "objective";
  const root = frame(`${metric} per trial, with the best so far`, "trial", metric);
  root.classList.add("metric-per-trial");
  const scored = job.trials.filter((t) => t.objective !== null);
  if (scored.length === 0) {
    root.append(svgEl("text", { x: L + 8, y: H / 2 }, "No trial has a final metric."));
    return root;
  }
  const [lo, hi] = objectiveRange(scored);
  const n = job.trials.length;
  const x = (i) => L + 12 + (n === 1 ? (W - L - R - 24) / 2 : (i * (W - L - R - 24)) / (n - 1));
  const y = scale(lo, hi, H - B - 8, T + 8, false);
  yAxis(root, lo, hi, y);
  const running = bestSoFar(job);
  // A step line: the best so far holds until a trial beats it.
  const steps = [];
  running.forEach((v, i) => {
    if (v === null) return;
    if (steps.length) steps.push(`${x(i)},${y(running[i - 1])}`);
    steps.push(`${x(i)},${y(v)}`);
  });
  if (steps.length) root.append(svgEl("polyline", { class: "best-so-far", points: steps.join(" ") }, undefined));
  job.trials.forEach((t, i) => {
    root.append(svgEl("text", { x: x(i), y: H - B + 14, "text-anchor": "middle" }, t.id));
    if (t.objective === null) return;
    const label = `trial ${trialName(job, t)}: ${metric} ${metricText(t.objective)}; best so far ${metricText(running[i])}` +
      (t.key === job.best_trial_key ? " (best trial)" : "");
    root.append(point(job, t, x(i), y(t.objective), label));
  });
  return root;
}

// Metric against one hyperparameter: a log axis for a log-scaled one.
function metricAgainst(job, param) {
  const metric = job.metric || "objective";
  const scored = job.trials.filter((t) => t.objective !== null && t.values[param.name] !== null && t.values[param.name] !== undefined);
  const log = param.log && scored.every((t) => t.values[param.name] > 0);
  const root = frame(`${metric} against ${param.name}${log ? " (log scale)" : ""}`, `${param.name}${log ? " (log)" : ""}`, metric);
  root.classList.add("metric-vs-param");
  root.setAttribute("data-param", param.name);
  root.setAttribute("data-log", String(log));
  if (scored.length === 0) {
    root.append(svgEl("text", { x: L + 8, y: H / 2 }, `No trial has a numeric ${param.name} and a metric.`));
    return root;
  }
  const xs = scored.map((t) => t.values[param.name]);
  const [xlo, xhi] = [Math.min(...xs), Math.max(...xs)];
  const [lo, hi] = objectiveRange(scored);
  const x = scale(xlo, xhi, L + 12, W - R - 12, log);
  const y = scale(lo, hi, H - B - 8, T + 8, false);
  yAxis(root, lo, hi, y);
  for (const v of ticks(xlo, xhi, log)) {
    if (log && (v < xlo || v > xhi)) continue;
    root.append(svgEl("text", { x: x(v), y: H - B + 14, "text-anchor": "middle" }, metricText(v)));
  }
  for (const t of scored) {
    const label = `trial ${trialName(job, t)}: ${param.name} ${metricText(t.params[param.name])}, ${metric} ${metricText(t.objective)}` +
      (t.key === job.best_trial_key ? " (best trial)" : "");
    root.append(point(job, t, x(t.values[param.name]), y(t.objective), label));
  }
  return root;
}

function figure(chart, caption) {
  return el("figure", {}, chart, el("figcaption", {}, caption));
}

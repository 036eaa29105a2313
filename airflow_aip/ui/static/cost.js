"use strict";
// What a job cost (an estimate, from the summary's price table): a line, its parts, and a small
// chart of the cost over time (airflow_aip/ui/costs.py makes the data). Every figure is text too.

function costChart(cost) {
  const pts = cost.series;
  if (!pts || pts.length < 2) return null;
  const w = 240, h = 80, pad = 6;
  const maxT = pts[pts.length - 1][0] || 1, maxC = Math.max(...pts.map((p) => p[1])) || 1;
  const xy = pts.map(([t, c]) => `${pad + (t / maxT) * (w - 2 * pad)},${h - pad - (c / maxC) * (h - 2 * pad)}`).join(" ");
  const label = `Cost over time: ${metricText(pts[pts.length - 1][1])} ${cost.currency} after ${seconds(maxT)}`;
  const svg = svgEl("svg", { viewBox: `0 0 ${w} ${h}`, class: "cost-chart", role: "img", "aria-label": label });
  svg.append(svgEl("polyline", { points: xy, fill: "none", stroke: "currentColor" }), svgEl("title", {}, label));
  return svg;
}

// The Training job tab: "Cost: USD 0.12 (estimate, price table of …)", each rung's or trial's, a chart.
function costBlock(job) {
  if (!job.cost) return null;
  const block = el("section", { class: "cost" }, el("p", { class: "cost-text" }, `Cost: ${job.cost.text}`));
  if (job.cost.parts.length) {
    block.append(el("ul", { class: "cost-parts" }, ...job.cost.parts.map((p) => el("li", {}, `${p.label}: ${p.text}`))));
  }
  const chart = costChart(job.cost);
  if (chart) block.append(chart);
  return block;
}

// The run tab's total of every job's estimate.
const runCostLine = (total) => (total ? el("p", { class: "run-cost" }, `What this run cost: ${total}`) : null);

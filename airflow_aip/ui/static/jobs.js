"use strict";
// Browse → Training jobs: recent jobs across the Dags this user may read, filtered by Dag and state.
// The job links to its view in this frame; its Dag, run and task link to Airflow's own pages (new tab).

const STATES = ["SUCCEEDED", "FAILED", "CANCELLED", "RUNNING", "QUEUED", "PREPARING", "CANCELLING"];

function select(name, label, options, chosen) {
  const s = el("select", { name, id: `filter-${name}` }, el("option", { value: "" }, "all"));
  for (const o of options) {
    const opt = el("option", { value: o }, o);
    if (o === chosen) opt.selected = true;
    s.append(opt);
  }
  return el("label", { for: `filter-${name}` }, label, s);
}

const LIMIT = 100;

function caption(data, q) {
  const where = q.get("dag_id") ? ` of ${q.get("dag_id")}` : "";
  return q.get("state")
    ? `${data.jobs.length} of the ${LIMIT} most recent jobs${where} ${data.jobs.length === 1 ? "is" : "are"} ${q.get("state")}; newest first.`
    : `${counted(data.jobs.length, "job")}${where}, newest first` +
      (data.jobs.length >= LIMIT ? ` (the ${LIMIT} most recent).` : " (all there are).");
}

function draw(data, out) {
  const q = params();
  const form = el("form", { class: "filters", method: "get", "aria-label": "Filter training jobs" },
                  select("dag_id", "Dag", data.dags, q.get("dag_id")), select("state", "Job state", STATES, q.get("state")),
                  el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) next.set(k, String(v));
    history.replaceState(null, "", "?" + next);
    out.replaceChildren();
    render(load, draw);
  });
  out.append(el("h1", {}, "Training jobs"), form);
  if (data.jobs.length === 0) {
    out.append(el("p", { class: "no-job" }, "No training job matches."));
    return;
  }
  const columns = [
    { label: "Job", cell: (j) => el("span", {}, el("a", { href: taskPage(j) }, j.job_id), j.image_uri ? el("span", { class: "muted image-uri", title: j.image_uri }, ` image ${j.image_uri}`) : ""), sort: (j) => j.job_id },
    { label: "Dag", cell: (j) => outLink(airflowPage(j, "dag"), j.dag_id), sort: (j) => j.dag_id },
    { label: "Run", cell: (j) => el("span", { class: "run-id", title: j.run_id }, outLink(airflowPage(j, "run"), j.run_id)), sort: (j) => j.run_id },
    { label: "Task", cell: (j) => outLink(airflowPage(j), j.map_index >= 0 ? `${j.task_id} [${j.map_index}]` : j.task_id), sort: (j) => j.task_id },
    { label: "State", cell: (j) => el("span", { title: j.read_now ? "read from the job now" : undefined }, stateText(j.state ?? `task ${j.task_state ?? "?"}`), j.rung ? el("span", { class: "muted rung" }, ` ${j.rung}`) : ""), sort: (j) => j.state ?? "" },
    { label: "Trials", cell: (j) => (j.tuning === false ? "single job" : j.trials ?? "—"), sort: (j) => j.trials, numeric: true },
    // what the job gave, then what it cost: the estimate's figure, its price table in the tooltip
    { label: "Result", cell: (j) => el("span", {}, resultText(j.result), j.cost ? el("span", { class: "cost muted", title: j.cost }, ` · ${costFigure(j.cost)}`) : ""), sort: (j) => j.result?.value },
    { label: "Export", cell: (j) => (j.promoted ? el("span", { class: "promoted-as" }, `promoted${j.promoted_as ? `: ${j.promoted_as}` : ""}`) : j.exported ? "exported" : j.exported === false ? "not exported" : "—") },
    { label: "Submitted", cell: (j) => when(j.submitted), sort: (j) => j.submitted },
  ];
  const table = sortableTable(caption(data, q), columns, data.jobs, (j) => ({ "data-job": j.job_id }));
  table.classList.add("jobs");
  out.append(table);
}

const load = () => {
  const q = params();
  q.set("limit", String(LIMIT));
  return getJson("jobs", q.toString());
};
render(load, draw);

// "USD 0.012 (estimate, price table of …)" -> "est. USD 0.012"; "no estimate (…)" -> "no estimate"
function costFigure(text) {
  const figure = text.split(" (")[0];
  return figure.startsWith("no estimate") ? figure : `est. ${figure}`;
}

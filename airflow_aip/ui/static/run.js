"use strict";
// The Dag run's "Training jobs" tab: every job of the run, its best trial, and what the export made of it.

// Before the export ran there is no verdict yet: "not exported" only when an export said so.
function exportText(job) {
  if (!job.export) return "—";
  if (job.export.promoted) return `promoted (${job.export.destination ?? ""})`;
  if (job.export.exported) return `exported (${job.export.destination ?? ""})`;
  return "not exported (did not beat the champion)";
}

// The job's result as every page words it (resultText); a best trial adds its rung and hyperparameters.
function bestText(job) {
  const best = job.trials.find((t) => t.key === job.best_trial_key);
  if (!best || job.result?.kind !== "trial") return resultText(job.result);
  const values = Object.entries(best.params).map(([k, v]) => `${k}=${metricText(v)}`).join(", ");
  const where = job.several_jobs ? ` of ${best.rung || "this job"}` : "";
  return `trial ${best.id}${where}: ${job.metric} ${metricText(best.objective)}${values ? ` (${values})` : ""}`;
}

// A job's output directory, Vertex resource name and console link, under the table.
function outputItem(j) {
  const li = el("li", { "data-job": j.job_id }, `${j.job_id}: `);
  if (j.image_uri) li.append("image ", uriText(j.image_uri, "image-uri"), " ");
  if (j.output_dir) li.append("output ", uriText(j.output_dir, "output-dir"), " ");
  if (j.name) li.append(uriText(j.name, "muted resource-name"), " ");
  if (j.console_url) li.append(outLink(j.console_url, j.console_label ?? "Google Cloud console"));
  return li;
}

render(() => getJson("run", params().toString()), (data, out) => {
  if (data.jobs.length === 0) {
    out.append(el("p", { class: "no-job" }, "No task of this run has an ended training job."));
    return;
  }
  const q = params();
  const columns = [
    { label: "Task", cell: (j) => el("a", { href: taskPage({ ...j, dag_id: q.get("dag_id"), run_id: q.get("run_id") }) }, j.map_index >= 0 ? `${j.task_id} [${j.map_index}]` : j.task_id), sort: (j) => j.task_id, cls: "short" },
    { label: "Job", cell: (j) => j.job_id, sort: (j) => j.job_id },
    { label: "State", cell: (j) => el("span", { title: j.ended_because ?? undefined }, stateText(j.state), j.rung ? el("span", { class: "muted rung" }, ` ${j.rung.text}`) : ""), sort: (j) => j.state },
    { label: "Trials", cell: (j) => (j.tuning ? j.trials.length : "single job"), sort: (j) => j.trials.length, numeric: true },
    { label: "Result", cell: (j) => bestText(j), sort: (j) => j.result?.value },
    { label: "Export", cell: (j) => exportText(j), sort: (j) => exportText(j) },
  ];
  const table = sortableTable(`${counted(data.jobs.length, "training job")} in this run.`, columns, data.jobs, (j) => ({ "data-job": j.job_id }));
  table.classList.add("jobs");
  out.append(el("h1", {}, "Training jobs of this run"), table);
  const total = runCostLine(data.cost);
  if (total) out.append(total);
  const outputs = data.jobs.filter((j) => j.image_uri || j.output_dir || j.name || j.console_url);
  if (outputs.length) {
    out.append(el("h2", {}, "Where each job ran and wrote"), el("ul", { class: "links outputs" }, ...outputs.map(outputItem)));
  }
  if (data.champion) out.append(championBlock(data.champion));
});

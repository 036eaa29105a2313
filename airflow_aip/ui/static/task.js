"use strict";
// The "Training job" tab of a task instance: state, timeline, links, charts and the trials table.

function jobHeader(job) {
  const head = el("section", { class: "job", "data-job": job.job_id });
  head.append(el("h1", {}, `Training job ${job.job_id}`),
              el("p", {}, "State: ", stateText(job.state), job.error_message ? ` — ${job.error_message}` : ""));
  const dl = el("dl", { class: "timeline" });
  for (const [label, at] of [["Created", job.create_time], ["Started", job.start_time], ["Ended", job.end_time]]) {
    dl.append(el("dt", {}, label), el("dd", {}, when(at)));
  }
  head.append(dl);
  const links = [external("Google Cloud console", job.console_url), external("Job logs (Cloud Logging)", job.logs_url)].filter(Boolean);
  if (links.length) head.append(el("ul", { class: "links" }, ...links));
  return head;
}

function trialsTable(job) {
  const metric = job.metric || "objective";
  const columns = [
    { label: "Trial", cell: (t) => (t.id === job.best_trial_id ? `★ ${t.id}` : t.id), sort: (t) => Number(t.id) },
    { label: "State", cell: (t) => t.state + (t.stopped_early ? " (stopped early)" : "") },
    ...job.parameters.map((p) => ({ label: p.name, cell: (t) => (t.values[p.name] != null ? fmt(t.values[p.name], 4) : t.params[p.name] ?? "—"), sort: (t) => t.values[p.name] ?? t.params[p.name], numeric: true })),
    { label: metric, cell: (t) => fmt(t.objective, 6), sort: (t) => t.objective, numeric: true },
    { label: "Steps", cell: (t) => t.step ?? "—", sort: (t) => t.step, numeric: true },
    { label: "Duration", cell: (t) => seconds(t.duration_s), sort: (t) => t.duration_s, numeric: true },
  ];
  const caption = `${job.trials.length} trials, ${job.goal === "MINIMIZE" ? "minimizing" : "maximizing"} ${metric}. ` +
    (job.best_trial_id ? `Best: trial ${job.best_trial_id} (highlighted). ` : "No best trial. ") + "Click a heading to sort.";
  const table = sortableTable(caption, columns, job.trials, (t) => ({
    "data-trial": t.id,
    class: t.id === job.best_trial_id ? "best" : undefined,
    "aria-current": t.id === job.best_trial_id ? "true" : undefined,
  }));
  table.classList.add("trials");
  return table;
}

function drawJob(job, out) {
  out.append(jobHeader(job));
  if (!job.tuning) {
    out.append(el("p", {}, "This job was not a hyperparameter-tuning job: it has no trials."));
    return;
  }
  if (job.trials.length === 0) {
    out.append(el("p", {}, "The job has no trials."));
    return;
  }
  const metric = job.metric || "objective";
  const charts = el("div", { class: "charts" },
    figure(metricPerTrial(job), `${metric} of each trial (dots) and the best so far (line).`),
    ...job.parameters.map((p) => figure(metricAgainst(job, p), `${metric} against ${p.name}` + (p.log ? " on a log axis (log-scaled in the search)." : "."))));
  out.append(el("h2", {}, "Trials"), trialsTable(job), charts);
}

render(() => getJson("task", params().toString()), (data, out) => {
  if (data.job) return drawJob(data.job, out);
  const task = params().get("task_id");
  if (data.job_id) {
    out.append(el("p", { class: "waiting" }, `Task ${task} submitted training job ${data.job_id} (task ${data.task_state ?? "not started"}). ` +
      "Its trials appear here when the task has finished waiting for it."));
  } else {
    out.append(el("p", { class: "no-job" }, `Task ${task} ran no training job.`));
  }
});

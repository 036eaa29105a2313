"use strict";
// The "Training job" tab of a task instance: state, timeline, links, charts and the trials table.

// The job's title, then what may be done with it ("Cancel job"), then its state and facts.
function jobHeader(job, actions) {
  const head = el("section", { class: "job", "data-job": job.job_id });
  head.append(el("h1", {}, `Training job ${job.job_id}`));
  if (actions) head.append(actions);
  // the state, the ladder's rung and the links share a line: the trials table stays in the first screen
  const line = el("div", { class: "state-line" });
  line.append(el("p", {}, "State: ", stateText(job.state), job.error_message ? ` — ${job.error_message}` : ""));
  if (job.rung) line.append(el("p", { class: "rung", "data-rung": job.rung.label }, `Capacity ladder: ${job.rung.text}`));
  const links = [external(job.console_label ?? "Google Cloud console", job.console_url), external("Job logs (Cloud Logging)", job.logs_url)].filter(Boolean);
  if (links.length) line.append(el("ul", { class: "links" }, ...links));
  head.append(line);
  if (job.ended_because) head.append(el("p", { class: "ended-because" }, `The task's wait ended: ${job.ended_because}`));
  const dl = el("dl", { class: "timeline" });
  for (const [label, at] of [["Created", job.create_time], ["Started", job.start_time], ["Ended", job.end_time]]) {
    dl.append(el("dt", {}, label), el("dd", {}, when(at)));
  }
  head.append(dl);
  const facts = el("dl", { class: "timeline facts" });
  if (job.result) facts.append(el("dt", {}, job.tuning ? "Best trial" : "Final metric"), el("dd", { class: "result" }, resultText(job.result)));
  if (job.image_uri) facts.append(el("dt", {}, "Image"), el("dd", {}, uriText(job.image_uri, "image-uri")));
  if (job.output_dir) facts.append(el("dt", {}, "Output directory"), el("dd", {}, uriText(job.output_dir, "output-dir")));
  if (job.name) facts.append(el("dt", {}, "Vertex resource"), el("dd", {}, uriText(job.name, "resource-name")));
  if (facts.childElementCount) head.append(facts);
  return head;
}

// Every rung of the capacity ladder, in order, with its part in the run; the row of the job above is marked.
const ENDED = {
  stockout: "stockout", flex_start_wait: "Flex-Start wait ran out", preempted: "Spot VMs reclaimed",
  quota: "quota refused the create", queued_limit: "QUEUED past queued_limit", resources_exhausted: "resources exhausted",
};

function ladderTable(job) {
  const columns = [
    { label: "Rung", cell: (r) => r.rung ?? "—", numeric: true },
    { label: "Placement", cell: (r) => r.placement + (r.region ? `, ${r.region}` : "") },
    { label: "Status", cell: (r) => r.status ?? "tried" },
    { label: "Job", cell: (r) => r.job_id ?? "—" },
    { label: "State", cell: (r) => (r.state === "NOT_CREATED" ? "not created" : stateText(r.state)) },
    { label: "Ended because", cell: (r) => (r.ended_because ? el("span", {}, ENDED[r.ended_because] ?? r.ended_because, r.detail ? el("span", { class: "muted detail" }, r.detail) : "") : "—") },
    { label: "Waited", cell: (r) => seconds(r.waited_s), numeric: true },
    { label: "Ran", cell: (r) => seconds(r.ran_s), numeric: true },
  ];
  const current = job.ladder.find((r) => r.job_id === job.job_id);
  const ran = job.end_time ? "ran" : "runs";
  const caption = `${counted(job.ladder.length, "rung")}, tried in order; only a lack of capacity moves the job to the next.` +
    (current ? ` This job ${ran} on rung ${current.rung} (${current.label}).` : "");
  const table = el("table", { class: "ladder" }, el("caption", {}, caption));
  const head = el("tr");
  for (const c of columns) head.append(el("th", { scope: "col" }, c.label));
  const body = el("tbody");
  for (const r of job.ladder) {
    const mine = r === current;
    const tr = el("tr", { "data-rung": r.label, "data-status": r.status ?? undefined, class: mine ? "current" : undefined, "aria-current": mine ? "true" : undefined });
    for (const c of columns) tr.append(el("td", { class: c.numeric ? "num" : undefined }, c.cell(r)));
    body.append(tr);
  }
  table.append(el("thead", {}, head), body);
  return table;
}

// Where a trial ran, when the study spans several jobs (rungs of a ladder, a resumed study).
const ranOn = (t) => el("span", {}, t.rung || "this job", " ", el("span", { class: "muted" }, t.job_id ?? ""));

// Two or more trials with the best objective: all are highlighted, and the page says which one
// counts as best and by what rule (airflow_aip/jobs/trials.py: best_trial).
function tiedText(job) {
  const tied = job.trials.filter((t) => (job.tied_trial_keys ?? []).includes(t.key));
  if (tied.length < 2) return "";
  return `Trials ${tied.map((t) => t.id).join(", ")} tied for best (all highlighted): a tie goes to the earliest trial in the job's list. `;
}

function trialsTable(job) {
  const metric = job.metric || "objective";
  const aligned = (value) => {  // a column's cells, one number of decimals (alignedTexts)
    const texts = new Map(alignedTexts(job.trials.map(value)).map((text, i) => [job.trials[i], text]));
    return (t) => texts.get(t);
  };
  const columns = [
    { label: "Trial", cell: (t) => (t.key === job.best_trial_key ? `★ ${t.id}` : t.id), sort: (t) => Number(t.id) },
    ...(job.several_jobs ? [{ label: "Ran on", cell: ranOn, sort: (t) => `${t.rung ?? ""} ${t.job_id ?? ""}` }] : []),
    { label: "State", cell: (t) => t.state + (t.stopped_early ? " (stopped early)" : ""), cls: "short" },
    ...job.parameters.map((p) => ({ label: p.name, cell: aligned((t) => t.params[p.name]), sort: (t) => t.values[p.name] ?? t.params[p.name], numeric: true })),
    { label: metric, cell: aligned((t) => t.objective), sort: (t) => t.objective, numeric: true },
    // what each trial's trainer logged to its Vertex AI Experiments run (airflow_aip/jobs/experiments.py)
    ...(job.logged_metrics ?? []).map((name) => ({ label: `${name} (logged)`, cell: aligned((t) => t.logged?.[name]), sort: (t) => t.logged?.[name], numeric: true })),
    { label: "Steps", cell: (t) => t.step ?? "—", sort: (t) => t.step, numeric: true },
    { label: "Duration", cell: (t) => seconds(t.duration_s), sort: (t) => t.duration_s, numeric: true },
  ];
  const best = job.trials.find((t) => t.key === job.best_trial_key);
  const bestText = best ? `Best: trial ${best.id}${job.several_jobs ? ` of ${best.rung || "this job"}` : ""} (highlighted). ` : "No best trial. ";
  const across = job.several_jobs ? ` across ${new Set(job.trials.map((t) => t.job_id)).size} jobs` : "";
  const logged = (job.logged_metrics ?? []).length ? "Columns marked (logged) are what each trial logged to its Vertex AI Experiments run. " : "";
  const caption = `${job.trials.length} trials${across}, ${job.goal === "MINIMIZE" ? "minimizing" : "maximizing"} ${metric}. ` +
    bestText + tiedText(job) + logged + "Click a heading to sort.";
  const table = sortableTable(caption, columns, job.trials, (t) => ({
    "data-trial": t.id,
    "data-job": t.job_id ?? undefined,
    class: t.key === job.best_trial_key ? "best" : (job.tied_trial_keys ?? []).includes(t.key) ? "tied" : undefined,
    "aria-current": t.key === job.best_trial_key ? "true" : undefined,
  }));
  table.classList.add("trials");
  return table;
}

function drawJob(job, out, actions) {
  out.append(jobHeader(job, actions));
  if (job.ladder.length) out.append(el("h2", {}, "Capacity ladder"), ladderTable(job));
  drawTrials(job, out);
  // below the trials, so the trials table still starts in the first screen at 1280x800
  const cost = costBlock(job);
  if (cost) out.append(el("h2", {}, "Cost"), cost);
}

function drawTrials(job, out) {
  if (!job.tuning) {
    out.append(el("p", { class: "single-job" }, "A single job, not a hyperparameter-tuning job: it has no trials."));
    if (job.experiment_run) out.append(experimentRunLine(job.experiment_run));
    return;
  }
  if (job.trials.length === 0) {
    out.append(el("p", {}, job.end_time ? "The job has no trials." : "No trial has started yet."));
    return;
  }
  const metric = job.metric || "objective";
  const charts = el("div", { class: "charts" },
    figure(metricPerTrial(job), `${metric} of each trial (dots) and the best so far (line).`),
    ...job.parameters.map((p) => figure(metricAgainst(job, p), `${metric} against ${p.name}` + (p.log ? " on a log axis (log-scaled in the search)." : "."))));
  // many hyperparameters: the table scrolls sideways in its box, the page never does
  out.append(el("h2", {}, "Trials"), el("div", { class: "scroll-x" }, trialsTable(job)), charts);
}

// A single job's Vertex AI Experiments run: which, and what its trainer logged there.
function experimentRunLine(run) {
  const metrics = Object.entries(run.metrics).map(([name, value]) => `${name} ${metricText(value)}`).join(", ");
  const where = run.experiment ? ` of experiment ${run.experiment}` : "";
  return el("p", { class: "experiment-run", "data-run": run.run }, `Logged to Experiments run ${run.run.split("/").pop()}${where}: ${metrics || "no metrics"}.`);
}

// While the task waits: the job as last read, why it waits, and who asked for a cancel.
function liveLines(data) {
  const lines = [];
  if (data.awaiting_decision) lines.push(el("p", { class: "awaiting-decision muted" }, "The champion decision comes from a later task of this run: it shows here when it arrives."));
  else if (data.held) lines.push(heldLine(data.held, data.task_state));
  else if (data.refresh_s) lines.push(el("p", { class: "live muted" }, `Live: read from the job's API, refreshed every ${data.refresh_s} s while the task waits (task ${data.task_state ?? "not scheduled yet"}).`));
  if (data.waiting) lines.push(el("p", { class: "why-waiting" }, data.waiting));
  if (data.read_now) lines.push(el("p", { class: "read-now muted" }, `Read from the job's API now: task ${data.task_state} ended without storing the job (killed, or marked failed, while it waited).`));
  if (data.read_error) lines.push(el("p", { class: "read-error", role: "alert" }, data.read_error));
  if (data.cancelled_by) lines.push(el("p", { class: "cancelled-by" }, `Cancel requested from this tab by ${data.cancelled_by.user} at ${when(data.cancelled_by.at)}.`));
  return lines;
}

// A job that ended while its task still waits: when the task resumes, and why it has not yet.
function heldLine(held, taskState) {
  const why = "because Airflow must read the task's deferral before its trigger may report: " +
    `an event sooner can fail the task (${held.issue}; [aip] deferral_hold).`;
  const text = held.until
    ? `The job ended; the task resumes at ${when(held.until)} (in ${Math.ceil(held.seconds_left)} s), ${why}`
    : `The job ended; the task resumes now (task ${taskState ?? "not scheduled yet"}) to store what the job did.`;
  return el("p", { class: "held", role: "status" }, text);
}

let cancelError = "", confirming = false;

// "Cancel job": only offered to users who may edit the task instance. It confirms first, in the
// page: Airflow's iframe sandbox has no allow-modals, so window.confirm() would answer false unseen.
function cancelButton(data, refresh) {
  const box = el("div", { class: "actions" });
  if (!confirming) {
    const ask = el("button", { type: "button", class: "cancel-job", id: "cancel-job" }, "Cancel job");
    ask.addEventListener("click", () => { confirming = true; cancelError = ""; refresh(); });
    box.append(ask);
  } else {
    const yes = el("button", { type: "button", class: "cancel-job", id: "confirm-cancel" }, "Yes, cancel the job");
    const no = el("button", { type: "button", id: "keep-job" }, "No, keep it running");
    yes.addEventListener("click", async () => {
      yes.disabled = no.disabled = true;
      try {
        await postJson("task/cancel", params().toString());
      } catch (e) {
        cancelError = e.message;
      }
      confirming = false;
      refresh();
    });
    no.addEventListener("click", () => { confirming = false; refresh(); });
    box.append(el("p", { role: "alert", class: "confirm" }, `Cancel training job ${data.job_id}? The task then fails, as for any cancelled job.`), yes, " ", no);
  }
  if (cancelError) box.append(el("p", { class: "read-error", role: "alert" }, cancelError));
  return box;
}

renderLive(() => getJson("task", params().toString()), (data, out, refresh) => {
  out.append(...liveLines(data));
  const actions = data.can_cancel ? cancelButton(data, refresh) : null;
  const task = params().get("task_id");
  if (data.job) {
    drawJob(data.job, out, actions);
  } else if (data.job_id) {
    out.append(el("p", { class: "waiting" }, `Task ${task} submitted training job ${data.job_id} (task ${data.task_state ?? "not started"}). ` +
      (data.refresh_s ? "Its state and trials appear here as they are read." : "It left no summary of the job.")));
    if (actions) out.append(actions);
  } else if (data.image) {
    out.append(el("h1", {}, "Trainer image"), el("p", { class: "built-image" }, `Task ${task} built and pushed `, uriText(data.image, "image-uri"), "."),
               el("p", { class: "muted" }, "The tag is a hash of the build context: the same files give the same image on any worker. The task log shows the build's steps and the push."));
  } else {
    out.append(el("p", { class: "no-job" }, `Task ${task} ran no training job` + (data.refresh_s ? " yet." : ".")));
  }
  if (data.champion) out.append(championBlock(data.champion));
  return data.refresh_s;
});

"use strict";
// Corral's dashboard. It talks only to the RAPI of the origin that served it,
// and puts every server value into the page as text (textContent), never as
// markup: names come from users.

const REFRESH_MS = 5000;
const JOB_POLL_MS = 500;
const JOB_LIST_LIMIT = 30;
const CREDENTIALS_KEY = "corral-rapi-credentials";
const FINAL_JOB_STATUSES = new Set(["success", "error", "canceled"]);
// [button label, HTTP method, resource below /2/instances/NAME/]
const INSTANCE_ACTIONS = [
  ["Start", "PUT", "startup"],
  ["Stop", "PUT", "shutdown"],
  ["Reboot", "POST", "reboot"],
];
const NODE_ROLES = { M: "master", C: "master candidate", R: "regular", D: "drained", O: "offline" };
const STATUS_HINTS = {
  401: "wrong user name or password, or this cluster requires a login",
  403: "this user may not do that (read-only access); nothing was changed",
};

const $ = (id) => document.getElementById(id);

/** Ganeti's RAPI HTML-escapes error messages inside its JSON: show them as text. */
function unescapeHtml(text) {
  return new DOMParser().parseFromString(text, "text/html").documentElement.textContent;
}

class RapiError extends Error {
  constructor(status, body) {
    const raw = body && typeof body === "object" ? body.message || body.explain : body;
    const detail = typeof raw === "string" ? unescapeHtml(raw) : raw;
    const hint = STATUS_HINTS[status];
    super(`HTTP ${status}: ${detail || "request failed"}${hint ? ` (${hint})` : ""}`);
    this.status = status;
  }
}

function savedCredentials() {
  const raw = sessionStorage.getItem(CREDENTIALS_KEY);
  return raw ? JSON.parse(raw) : null;
}

function basicAuth(creds) {
  const bytes = new TextEncoder().encode(`${creds.user}:${creds.password}`);
  return "Basic " + btoa(String.fromCharCode(...bytes));
}

/** One RAPI request; answers the decoded JSON body or throws a RapiError. */
async function rapi(method, path, creds = savedCredentials()) {
  const headers = { Accept: "application/json" };
  if (creds) headers.Authorization = basicAuth(creds);
  // credentials "omit": a 401 must not open the browser's own password prompt
  const response = await fetch(path, { method, headers, credentials: "omit", cache: "no-store" });
  const text = await response.text();
  let body = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (_) {
    // not JSON (e.g. a proxy's error page): keep the text
  }
  if (!response.ok) throw new RapiError(response.status, body);
  return body;
}

/** An element with text children (strings become text nodes, never markup). */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "data") Object.assign(node.dataset, value);
    else node[key] = value;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

// --- messages --------------------------------------------------------------

let errorFromRefresh = false;

function showError(err, fromRefresh = false) {
  $("error").textContent = err instanceof Error ? err.message : String(err);
  $("error").hidden = false;
  errorFromRefresh = fromRefresh;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

function showNotice(text) {
  $("notice").textContent = text;
  $("notice").hidden = false;
}

// --- formatting ------------------------------------------------------------

function mebibytes(value) {
  return typeof value === "number" ? `${value} MiB` : "";
}

function timestamp(ts) {
  if (!Array.isArray(ts)) return "";
  return new Date(ts[0] * 1000 + Math.floor(ts[1] / 1000)).toLocaleString();
}

function yesNo(value) {
  return value ? "yes" : "no";
}

function statusClass(status) {
  return "status status-" + String(status).replace(/[^A-Za-z_-]/g, "");
}

function nodeState(node) {
  if (node.offline) return "offline";
  if (node.drained) return "drained";
  return "online";
}

// --- rendering -------------------------------------------------------------

const lastRendered = {};

/** Re-render ``key`` only when its data changed (keeps buttons stable under clicks). */
function renderIfChanged(key, data, render) {
  const json = JSON.stringify(data);
  if (lastRendered[key] === json) return;
  lastRendered[key] = json;
  render(data);
}

function clusterHealth(nodes, instances) {
  const problems = [];
  const down = nodes.filter((n) => n.offline).length;
  if (down) problems.push(`${down} node(s) offline`);
  const failed = instances.filter((i) => /ERROR|nodedown|nodeoffline/.test(i.status)).length;
  if (failed) problems.push(`${failed} instance(s) in error`);
  return problems.length ? `problems: ${problems.join(", ")}` : "healthy";
}

function renderCluster([info, nodes, instances]) {
  $("cluster-title").textContent = info.name || "";
  document.title = `Corral: ${info.name || "dashboard"}`;
  const count = (list, test) => list.filter(test).length;
  const rows = [
    ["name", "Name", info.name],
    ["master", "Master", info.master],
    ["software_version", "Software version", info.software_version],
    ["hypervisors", "Enabled hypervisors", (info.enabled_hypervisors || []).join(", ")],
    ["disk_templates", "Disk templates", (info.enabled_disk_templates || []).join(", ")],
    ["nodes", "Nodes", `${nodes.length} (${count(nodes, (n) => !n.offline)} online, ` +
      `${count(nodes, (n) => n.offline)} offline, ${count(nodes, (n) => n.drained)} drained)`],
    ["instances", "Instances", `${instances.length} (${count(instances, (i) => i.oper_state)} running)`],
    ["health", "Health", clusterHealth(nodes, instances)],
  ];
  $("cluster-info").replaceChildren(
    ...rows.flatMap(([key, label, value]) => [el("dt", {}, label), el("dd", { data: { field: key } }, value)]),
  );
}

function renderNodes(nodes) {
  $("node-rows").replaceChildren(
    ...nodes.map((n) =>
      el("tr", { data: { node: n.name } },
        el("td", {}, n.name),
        el("td", {}, NODE_ROLES[n.role] || n.role),
        el("td", {}, nodeState(n)),
        el("td", {}, mebibytes(n.mtotal)),
        el("td", {}, mebibytes(n.mfree)),
        el("td", {}, n.pinst_cnt)),
    ),
  );
}

function actionButtons(name) {
  return INSTANCE_ACTIONS.map(([label, method, action]) => {
    const button = el("button", { type: "button", className: "action", data: { action } }, label);
    button.addEventListener("click", () => instanceAction(button, name, method, action));
    return button;
  });
}

function renderInstances(instances) {
  const loggedIn = savedCredentials() !== null;
  document.querySelector("#instances .actions-head").hidden = !loggedIn;
  $("instance-rows").replaceChildren(
    ...instances.map((i) => {
      const memory = i.beparams ? i.beparams.memory ?? i.beparams.maxmem : undefined;
      const row = el("tr", { data: { instance: i.name } },
        el("td", { className: "name" }, i.name),
        el("td", { className: statusClass(i.status) }, i.status),
        el("td", { className: "admin-state" }, i.admin_state),
        el("td", { className: "oper-state" }, yesNo(i.oper_state)),
        el("td", {}, i.pnode),
        el("td", {}, i.os),
        el("td", {}, mebibytes(memory)),
        el("td", {}, i.disk_template));
      if (loggedIn) row.append(el("td", { className: "actions" }, ...actionButtons(i.name)));
      return row;
    }),
  );
}

function renderJobs(jobs) {
  const newest = [...jobs].sort((a, b) => Number(b.id) - Number(a.id)).slice(0, JOB_LIST_LIMIT);
  $("job-rows").replaceChildren(
    ...newest.map((job) => {
      const id = String(job.id);
      const select = el("button", { type: "button", className: "job-link" }, id);
      select.addEventListener("click", () => followJob(id));
      return el("tr", { data: { job: id }, className: id === followedJob ? "selected" : "" },
        el("td", {}, select),
        el("td", { className: statusClass(job.status) }, job.status),
        el("td", { className: "summary" }, (job.summary || []).join(", ")),
        el("td", {}, timestamp(job.received_ts)));
    }),
  );
}

/** A failed opcode's result, ``[error class, [message, code...]]``, as one line. */
function opError(result) {
  if (result === null) return "";
  if (Array.isArray(result) && typeof result[0] === "string" && Array.isArray(result[1])) {
    const [message, ...details] = result[1];
    return `${result[0]}: ${message}${details.length ? ` (${details.join(", ")})` : ""}`;
  }
  return JSON.stringify(result);
}

// An import/export job's progress lines (Ganeti's wording) and a disk's last line.
const PROGRESS_LINE = /^(disk\/\d+|Disk \d+) sent (\S+), ([\d.]+ MiB\/s)(?:, (\d+)%)?(?:, ETA (.+))?$/;
const TRANSFER_END = /^(disk\/\d+|Disk \d+) (finished|failed to) /;

/** One bar per disk still transferring, from the job's latest progress lines. */
function renderProgress(job) {
  const bars = new Map();
  for (const log of job.oplog || []) {
    for (const [, , , message] of log) {
      if (typeof message !== "string") continue;
      const sent = PROGRESS_LINE.exec(message);
      const ended = TRANSFER_END.exec(message);
      if (sent) bars.set(sent[1], sent);
      else if (ended) bars.delete(ended[1]);
    }
  }
  $("job-progress").replaceChildren(...[...bars.values()].map(([, name, amount, rate, pct, eta]) => {
    const bar = el("progress", { max: 100 });
    if (pct !== undefined) bar.value = Number(pct);
    const text = [pct !== undefined ? `${pct}%` : "", amount, rate, eta ? `ETA ${eta}` : ""];
    return el("div", { className: "transfer", data: { disk: name } },
      el("span", { className: "disk" }, name), bar,
      el("span", { className: "figures" }, text.filter(Boolean).join(" ")));
  }));
}

function renderJobDetail(job) {
  $("job-id").textContent = String(job.id);
  $("job-status").textContent = job.status;
  $("job-status").className = statusClass(job.status);
  $("job-summary").textContent = (job.summary || []).join(", ");
  const entries = (job.oplog || []).flatMap((log, index) =>
    log.map(([serial, ts, type, message]) =>
      el("li", { data: { serial: String(serial) } },
        `${timestamp(ts)} [op ${index + 1}, ${type}] `,
        typeof message === "string" ? message : JSON.stringify(message))),
  );
  $("job-log").replaceChildren(...(entries.length ? entries : [el("li", { className: "empty" }, "(no log entries)")]));
  renderProgress(job);
  const failed = job.status === "error" || job.status === "canceled";
  $("job-result").hidden = !failed;
  $("job-result").textContent = failed ? (job.opresult || []).map(opError).join("\n") : "";
  $("job-detail").hidden = false;
  for (const row of document.querySelectorAll("#job-rows tr")) {
    row.classList.toggle("selected", row.dataset.job === String(job.id));
  }
}

// --- refreshing ------------------------------------------------------------

let refreshRunning = false;
let refreshAgain = false;

/** Reload everything; a call during a reload schedules one more afterwards. */
async function refresh() {
  if (refreshRunning) {
    refreshAgain = true;
    return;
  }
  refreshRunning = true;
  try {
    const [info, nodes, instances, jobs] = await Promise.all([
      rapi("GET", "/2/info"),
      rapi("GET", "/2/nodes?bulk=1"),
      rapi("GET", "/2/instances?bulk=1"),
      rapi("GET", "/2/jobs?bulk=1"),
    ]);
    renderIfChanged("cluster", [info, nodes, instances], renderCluster);
    renderIfChanged("nodes", nodes, renderNodes);
    renderIfChanged("instances", instances, renderInstances);
    renderIfChanged("jobs", jobs, renderJobs);
    $("refreshed").textContent = new Date().toLocaleTimeString();
    if (errorFromRefresh) clearError();
  } catch (err) {
    showError(err, true);
  } finally {
    refreshRunning = false;
    if (refreshAgain) {
      refreshAgain = false;
      refresh();
    }
  }
}

// --- jobs: live progress ---------------------------------------------------

let followedJob = null;
let followCount = 0; // only the latest followJob() call keeps polling

/** Show job ``id`` and poll it until it is final (works for read-only users too). */
async function followJob(id) {
  followedJob = id;
  const mine = ++followCount;
  while (mine === followCount) {
    let job;
    try {
      job = await rapi("GET", `/2/jobs/${encodeURIComponent(id)}`);
    } catch (err) {
      showError(err);
      return;
    }
    if (mine !== followCount) return;
    renderJobDetail(job);
    if (FINAL_JOB_STATUSES.has(job.status)) {
      refresh(); // the job may have changed instances or nodes
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, JOB_POLL_MS));
  }
}

// --- actions and login -----------------------------------------------------

async function instanceAction(button, name, method, action) {
  button.disabled = true;
  try {
    const jobId = await rapi(method, `/2/instances/${encodeURIComponent(name)}/${action}`);
    clearError();
    showNotice(`Job ${jobId} submitted: ${action} of ${name}`);
    refresh();
    followJob(String(jobId));
  } catch (err) {
    showError(err);
  } finally {
    button.disabled = false;
  }
}

function showSession() {
  const creds = savedCredentials();
  $("login-form").hidden = creds !== null;
  $("session").hidden = creds === null;
  $("session-user").textContent = creds ? creds.user : "";
  delete lastRendered.instances; // the action buttons depend on the login
}

async function login(event) {
  event.preventDefault();
  const creds = { user: $("login-user").value, password: $("login-password").value };
  try {
    // the server checks credentials whenever they are sent, even on open reads
    await rapi("GET", "/2/info", creds);
  } catch (err) {
    showError(err);
    return;
  }
  sessionStorage.setItem(CREDENTIALS_KEY, JSON.stringify(creds));
  $("login-password").value = "";
  clearError();
  showSession();
  refresh();
}

function logout() {
  sessionStorage.removeItem(CREDENTIALS_KEY);
  showSession();
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", login);
  $("logout-button").addEventListener("click", logout);
  showSession();
  refresh();
  setInterval(refresh, REFRESH_MS);
});

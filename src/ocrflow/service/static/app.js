// ocrflow's web page: upload, jobs with progress bars, a finished document page by page.
// The token stays in sessionStorage (this tab only) and goes in an Authorization header;
// names and messages are set as text, only the server's sanitised Markdown HTML as HTML.
"use strict";

const TOKEN_KEY = "ocrflow-token";
const POLL_MS = 1000;
const $ = (id) => document.getElementById(id);

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: { ...authHeaders(), ...(options.headers || {}) } });
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = JSON.stringify((await response.json()).detail ?? detail); } catch (e) { /* not JSON */ }
    throw new Error(response.status + " " + detail);
  }
  return response;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = value;
    else if (key === "className") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function showTokenState() {
  $("token-state").textContent = sessionStorage.getItem(TOKEN_KEY) ? "token set" : "no token";
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
  $("token").value = "";
  showTokenState();
  refreshJobs();
});

$("upload-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const files = $("files").files;
  if (!files.length) { $("upload-state").textContent = "choose files first"; return; }
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  $("upload-state").textContent = "uploading…";
  try {
    const job = await (await api("/v1/jobs", { method: "POST", body: form })).json();
    $("upload-state").textContent = "job " + job.id + " queued";
    $("upload-form").reset();
    refreshJobs();
  } catch (error) {
    $("upload-state").textContent = "upload failed: " + error.message;
  }
});

function jobsOf(body) {
  return Array.isArray(body) ? body : (body.jobs || body.items || []);
}

function newJobRow(job) {
  const bar = el("span", { className: "bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100" },
    el("div", {}));
  const open = el("button", { className: "link open-job", type: "button", text: "documents" });
  open.addEventListener("click", () => showDocuments(job.id));
  const when = typeof job.created === "number" ? new Date(job.created * 1000) : new Date(job.created);
  const created = job.created && !isNaN(when) ? when.toLocaleString() : "";
  return el("tr", { "data-job-id": job.id },
    el("td", {}, el("code", { text: job.id.slice(0, 12) })),
    el("td", { text: created }),
    el("td", { className: "job-status" }),
    el("td", {}, bar, el("span", { className: "job-pages" })),
    el("td", {}, open));
}

// Rows are updated in place (not rebuilt) so a click or a selection survives the polling.
function updateJobRow(row, job) {
  const pages = job.pages || { done: 0, total: 0 };
  const share = pages.total ? Math.round(100 * pages.done / pages.total) : (job.status === "done" ? 100 : 0);
  row.className = "status-" + job.status;
  row.dataset.status = job.status;
  row.querySelector(".job-status").textContent = job.status;
  const bar = row.querySelector(".bar");
  bar.setAttribute("aria-valuenow", String(share));
  bar.firstChild.style.width = share + "%";
  row.querySelector(".job-pages").textContent = " " + pages.done + " / " + pages.total;
}

async function refreshJobs() {
  try {
    const body = await (await api("/v1/jobs")).json();
    const tbody = $("jobs").tBodies[0];
    const existing = new Map([...tbody.rows].map((row) => [row.dataset.jobId, row]));
    const jobs = jobsOf(body);
    for (const job of jobs) {
      const row = existing.get(job.id) || newJobRow(job);
      existing.delete(job.id);
      updateJobRow(row, job);
      tbody.append(row);  // moves an existing row: keeps the newest-first order
    }
    for (const gone of existing.values()) gone.remove();
    $("jobs-state").textContent = jobs.length ? "" : "no jobs yet";
  } catch (error) {
    $("jobs-state").textContent = "cannot list jobs: " + error.message;
  }
}

async function showDocuments(jobId) {
  $("documents-section").hidden = false;
  $("documents-job").textContent = jobId.slice(0, 12);
  const list = $("documents");
  list.replaceChildren(el("li", { text: "loading…" }));
  try {
    const body = await (await api("/v1/jobs/" + jobId + "/documents")).json();
    const items = body.documents.map((doc) => {
      const link = el("button", { className: "link doc", type: "button", "data-doc-id": doc.id, text: doc.name });
      link.addEventListener("click", () => showDocument(jobId, doc.id));
      const note = " " + doc.status + ", " + doc.pages + " pages" +
        (doc.fallback_pages ? ", " + doc.fallback_pages + " fell back" : "") +
        (doc.failed_pages ? ", " + doc.failed_pages + " not converted" : "") + (doc.reason ? " [" + doc.reason + "]" : "");
      return el("li", {}, link, el("span", { text: note }));
    });
    list.replaceChildren(...(items.length ? items : [el("li", { text: "no finished document yet" })]));
  } catch (error) {
    list.replaceChildren(el("li", { className: "error", text: error.message }));
  }
}

// Page images load one at a time: the server renders only a few at once per token (429
// beyond, with Retry-After), so a long document must not ask for every page together.
let imageQueue = Promise.resolve();
const IMAGE_TRIES = 20;

function loadImage(img, url) {
  imageQueue = imageQueue.then(() => fetchImage(img, url))
    .catch((error) => { img.alt = "image unavailable: " + error.message; });
}

async function fetchImage(img, url) {
  for (let attempt = 1; ; attempt++) {
    const response = await fetch(url, { headers: authHeaders() });
    if (response.status === 429 && attempt < IMAGE_TRIES) {
      const seconds = Number(response.headers.get("Retry-After")) || 1;
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      continue;
    }
    if (!response.ok) { img.alt = "image unavailable: " + response.status; return; }
    img.src = URL.createObjectURL(await response.blob());
    return;
  }
}

// Boxes are fractions 0..1 of the page image: placed in percent over it, they follow it at
// any size. Positions go through the CSSOM (allowed by the CSP; style attributes are not).
function place(node, bbox) {
  const [x0, y0, x1, y1] = bbox.map(Number);
  node.style.left = (x0 * 100) + "%";
  node.style.top = (y0 * 100) + "%";
  node.style.width = ((x1 - x0) * 100) + "%";
  node.style.height = ((y1 - y0) * 100) + "%";
  return node;
}

function score(value) {
  return value === null || value === undefined ? "none" : Number(value).toFixed(2);
}

function overlay(page) {
  const layer = el("div", { className: "boxes" });
  for (const box of page.boxes || []) {
    const tip = box.label + (box.source_label ? " (" + box.source_label + ")" : "") +
      (box.confidence === null || box.confidence === undefined ? "" : " · confidence " + score(box.confidence));
    layer.append(place(el("div", { className: "box", "data-label": box.label, "data-block": String(box.block), title: tip }), box.bbox));
  }
  for (const line of page.low_lines || []) {
    layer.append(place(el("div", { className: "low-line", "data-confidence": String(line.confidence),
      title: "low confidence " + score(line.confidence) + ": " + line.text }), line.bbox));
  }
  return layer;
}

function confidenceBadge(page, threshold) {
  const lows = (page.low_lines || []).length;
  const low = lows > 0 || (page.confidence !== null && page.confidence !== undefined && page.confidence < threshold);
  const text = "confidence " + score(page.confidence) + (lows ? " (" + lows + (lows > 1 ? " lines" : " line") + " < " + threshold + ")" : "");
  return el("span", { className: "badge confidence" + (low ? " low" : ""), text: text });
}

function pageBlock(jobId, docId, page, threshold) {
  const head = el("div", { className: "page-head" },
    el("strong", { text: "page " + page.page }),
    el("span", { className: "badge route", text: page.route }),
    el("span", { className: "badge", text: page.status }),
    confidenceBadge(page, threshold));
  const why = page.reason ? ": " + page.reason : "";
  if (page.fallback) head.append(el("span", { className: "badge fallback", text: "fallback" + why }));
  else if (page.status !== "ok") head.append(el("span", { className: "badge problem", text: "not converted" + why }));
  const img = el("img", { alt: "page " + page.page, "data-page": String(page.page) });
  loadImage(img, "/v1/jobs/" + jobId + "/documents/" + docId + "/pages/" + page.page + ".jpg");
  const figure = el("div", { className: "page-figure" }, img, overlay(page));
  const text = el("div", { className: "markdown" });
  text.innerHTML = page.html;  // rendered by the server with raw HTML escaped
  return el("div", { className: "page", "data-page": String(page.page) }, head, el("div", {}, figure), text);
}

// The legend names the labels the document's boxes have, in the order they first appear.
function showBoxTools(doc) {
  const labels = [];
  let lows = 0;
  for (const page of doc.page_list) {
    for (const box of page.boxes || []) if (!labels.includes(box.label)) labels.push(box.label);
    lows += (page.low_lines || []).length;
  }
  const items = labels.map((label) => el("span", { className: "legend-item" },
    el("span", { className: "swatch", "data-label": label }), label));
  if (lows) items.push(el("span", { className: "legend-item" }, el("span", { className: "swatch low" }),
    "line confidence < " + doc.low_confidence));
  $("legend").replaceChildren(...items);
  $("show-low-label").hidden = !lows;
  $("box-tools").hidden = !labels.length && !lows;
}

for (const [id, hidden] of [["show-boxes", "hide-boxes"], ["show-low", "hide-low"]]) {
  $(id).addEventListener("change", () => $("document").classList.toggle(hidden, !$(id).checked));
}

async function showDocument(jobId, docId) {
  $("document-section").hidden = false;
  const target = $("document");
  target.replaceChildren(el("p", { text: "loading…" }));
  try {
    const doc = await (await api("/v1/jobs/" + jobId + "/documents/" + docId)).json();
    $("document-title").textContent = doc.name + " (" + doc.status + ")";
    showBoxTools(doc);
    target.replaceChildren(...doc.page_list.map((page) => pageBlock(jobId, docId, page, doc.low_confidence)));
    target.scrollIntoView();
  } catch (error) {
    target.replaceChildren(el("p", { className: "error", text: error.message }));
  }
}

showTokenState();
refreshJobs();
setInterval(refreshJobs, POLL_MS);

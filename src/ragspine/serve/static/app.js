// The ragspine web page: search a knowledge base, upload documents. Plain DOM, no dependencies.
// Text from the server is only ever set with textContent / text nodes, never parsed as HTML.
"use strict";

const KEY_STORAGE = "ragspine.apiKey";
const SCORE_LABELS = [["bm25", "BM25"], ["vector", "vector"], ["fused", "fused"], ["rerank", "rerank"]];
const CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af";
// One CJK character, or a run of other letters and digits.
const TOKEN = new RegExp(`[${CJK}]|(?:(?![${CJK}])[\\p{L}\\p{N}])+`, "gu");
const POLL_MS = 300;

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) node.append(child); // strings become text nodes
  return node;
}

function show(node, message) {
  node.textContent = message || "";
  node.hidden = !message;
}

// ---- the API ----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function describe(error) {
  if (!(error instanceof ApiError)) return `Request failed: ${error.message}`;
  const text = `${error.status} ${error.code}: ${error.message}`;
  if (error.status === 401) return `Not authorised (${text}). Check the API key above.`;
  if (error.status === 403) return `Forbidden (${text}). This key may not do that.`;
  return text;
}

async function api(method, path, body) {
  const headers = {};
  const key = localStorage.getItem(KEY_STORAGE);
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined && !(body instanceof FormData)) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(body);
  }
  const response = await fetch(path, { method, headers, body });
  let data = null;
  try {
    data = await response.json();
  } catch {
    // not JSON: reported below from the status alone
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || "http_error",
                       error.message || response.statusText);
  }
  return data;
}

// ---- connection and knowledge bases -----------------------------------------------------------

let loads = 0; // only the latest load may fill the list (an older one may answer last)

async function loadKnowledgeBases() {
  const select = $("kb");
  const status = $("connection-status");
  const previous = select.value;
  const load = ++loads;
  status.className = "status";
  status.textContent = "Loading knowledge bases…";
  try {
    const { kbs } = await api("GET", "/v1/kbs");
    if (load !== loads) return;
    select.replaceChildren(...kbs.map(({ name }) => el("option", { value: name }, name)));
    if (kbs.some(({ name }) => name === previous)) select.value = previous;
    status.textContent = kbs.length
      ? `Connected: ${kbs.length} knowledge base${kbs.length === 1 ? "" : "s"}.`
      : "Connected, but this key may use no knowledge base.";
  } catch (error) {
    if (load !== loads) return;
    select.replaceChildren();
    status.className = "status error";
    status.textContent = describe(error);
  }
}

function connect(event) {
  event.preventDefault();
  const key = $("api-key").value.trim();
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
  loadKnowledgeBases();
}

// ---- search -----------------------------------------------------------------------------------

function parseObject(text, what) {
  if (!text.trim()) return null;
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} are not valid JSON: ${error.message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`${what} must be a JSON object, like {"year": {"gte": 2020}}.`);
  }
  return value;
}

function queryTerms(query) {
  return new Set((query.toLowerCase().match(TOKEN) || []));
}

// The text as nodes, each word (or CJK character) of the query inside a <mark>.
function highlighted(text, terms) {
  const fragment = document.createDocumentFragment();
  let last = 0;
  for (const match of text.matchAll(TOKEN)) {
    if (!terms.has(match[0].toLowerCase())) continue;
    fragment.append(text.slice(last, match.index), el("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  fragment.append(text.slice(last));
  return fragment;
}

function formatScore(value) {
  return typeof value === "number" ? value.toFixed(4) : "–";
}

function renderResult(snippet, terms) {
  const title = snippet.title || snippet.doc_id;
  const heading = el("h3", {}, title);
  if (snippet.title && snippet.title !== snippet.doc_id) {
    heading.append(" ", el("code", { "data-testid": "doc-id" }, snippet.doc_id));
  }
  const sensitivity = String(snippet.sensitivity || "PUBLIC").toUpperCase();
  if (sensitivity !== "PUBLIC") {
    heading.append(" ", el("span", { class: "badge", "data-testid": "sensitivity" }, sensitivity));
  }
  const scores = el("dl", { class: "scores", "data-testid": "scores" });
  const given = snippet.scores || {};
  for (const [key, label] of SCORE_LABELS) {
    scores.append(el("dt", {}, label), el("dd", { "data-score": key }, formatScore(given[key])));
  }
  const text = el("p", { class: "text", "data-testid": "snippet-text" });
  text.append(highlighted(snippet.text || "", terms));
  return el("li", { class: "result", "data-testid": "result" },
    heading,
    el("cite", { "data-testid": "locator" }, snippet.source_locator || snippet.doc_id),
    text,
    scores);
}

function renderSummary(found) {
  const summary = $("search-summary");
  const count = found.results.length;
  const notes = [
    el("p", { "data-testid": "timing" },
       `${count} result${count === 1 ? "" : "s"} in ${Number(found.timing_ms).toFixed(1)} ms`),
  ];
  if (found.filters_dropped) {
    notes.push(el("p", { class: "notice", "data-testid": "filters-dropped" },
      "Filters dropped: nothing matched the filters, so these results ignore them."));
  }
  if (found.degraded || (found.degraded_reasons || []).length) {
    const reasons = (found.degraded_reasons || []).join("; ") || "unspecified";
    notes.push(el("p", { class: "notice", "data-testid": "degraded" }, `Degraded: ${reasons}`));
  }
  summary.replaceChildren(...notes);
}

async function search(event) {
  event.preventDefault();
  const error = $("search-error");
  show(error, "");
  const kb = $("kb").value;
  const query = $("query").value;
  let filters;
  try {
    filters = parseObject($("filters").value, "Filters");
  } catch (problem) {
    show(error, problem.message);
    return; // nothing is sent
  }
  if (!kb) {
    show(error, "Choose a knowledge base first (connect with a key that may use one).");
    return;
  }
  const body = { query, top_k: Number($("top-k").value) || 10 };
  if (filters) body.filters = filters;
  if ($("mode").value) body.mode = $("mode").value;
  if ($("rerank").value.trim()) body.rerank = $("rerank").value.trim();
  const button = $("search");
  button.disabled = true;
  $("search-summary").textContent = "Searching…";
  try {
    const found = await api("POST", `/v1/kbs/${encodeURIComponent(kb)}/search`, body);
    const terms = queryTerms(query);
    $("results").replaceChildren(...found.results.map((s) => renderResult(s, terms)));
    renderSummary(found);
  } catch (problem) {
    $("results").replaceChildren();
    $("search-summary").textContent = "";
    show(error, describe(problem));
  } finally {
    button.disabled = false;
  }
}

// ---- upload -----------------------------------------------------------------------------------

function renderJob(job) {
  const progress = $("job-progress");
  progress.max = Math.max(job.total || job.files || 1, 1);
  progress.value = job.done || 0;
  $("job").dataset.status = job.status;
  const files = `${job.files} file${job.files === 1 ? "" : "s"} uploaded`;
  $("job-status").textContent = `${job.status} — ${job.done || 0} / ${job.total || job.files} (${files})`;
  $("job-errors").replaceChildren(...(job.errors || []).map(({ file, error }) =>
    el("li", { "data-testid": "job-error" }, el("strong", {}, file || "(job)"), `: ${error}`)));
  const report = job.report;
  $("job-report").textContent = report
    ? `Added ${report.added}, updated ${report.updated}, unchanged ${report.unchanged}, ` +
      `failed ${(report.failed || []).length}, chunks written ${report.chunks_written}.` +
      (report.vector_error ? ` Vectors: ${report.vector_error}` : "")
    : "";
}

async function upload(event) {
  event.preventDefault();
  const error = $("upload-error");
  show(error, "");
  const kb = $("kb").value;
  const files = $("files").files;
  const form = new FormData();
  try {
    const metadata = parseObject($("upload-metadata").value, "Metadata");
    if (metadata) form.append("metadata", JSON.stringify(metadata));
  } catch (problem) {
    show(error, problem.message);
    return;
  }
  if (!kb) {
    show(error, "Choose a knowledge base first.");
    return;
  }
  for (const file of files) form.append("files", file, file.name);
  const button = $("upload");
  button.disabled = true;
  try {
    let job = await api("POST", `/v1/kbs/${encodeURIComponent(kb)}/documents`, form);
    $("job").hidden = false;
    renderJob(job);
    while (job.status !== "done" && job.status !== "failed") {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      job = await api("GET", `/v1/jobs/${encodeURIComponent(job.id)}`);
      renderJob(job);
    }
    $("upload-form").reset();
  } catch (problem) {
    show(error, describe(problem));
  } finally {
    button.disabled = false;
  }
}

// ---- start ------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("api-key").value = localStorage.getItem(KEY_STORAGE) || "";
  $("connect-form").addEventListener("submit", connect);
  $("search-form").addEventListener("submit", search);
  $("upload-form").addEventListener("submit", upload);
  loadKnowledgeBases(); // works at once under --no-auth or with a remembered key
});

// pxeperf dashboard: plain JavaScript, no build step, no external assets.
// With a token, open the page as /?access_token=TOKEN: requests carry it.
"use strict";
const token = new URLSearchParams(location.search).get("access_token") || "";
const $ = (s) => document.querySelector(s);
const filters = { client: "", label: "", since: "24h" };

function withToken(u) {
  if (!token) return u;
  return u + (u.includes("?") ? "&" : "?") + "access_token=" + encodeURIComponent(token);
}
async function getJSON(u) {
  const r = await fetch(withToken(u), { headers: token ? { Authorization: "Bearer " + token } : {} });
  if (!r.ok) throw new Error(u + ": HTTP " + r.status);
  return r.json();
}
function query(extra) {
  const q = new URLSearchParams();
  if (filters.since) q.set("since", filters.since);
  if (filters.label) q.append("label", filters.label);
  if (filters.client) q.set("client", filters.client);
  for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
  return q.toString();
}
function esc(s) {
  return String(s == null ? "" : s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function bytes(n) {
  if (n < 0) return "?";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
const mbps = (v) => (v || 0).toFixed(1);
const when = (t) => new Date(t).toLocaleTimeString();
function clientCell(r) {
  const id = r.client_mac || r.client_ip;
  return `<a class="client" data-client="${esc(id)}">${esc(id)}</a>`;
}

// In progress: pushed by the server every half second.
function renderActive(a) {
  const tb = $("#active tbody");
  const rows = a.transfers || [];
  $("#active-count").textContent = rows.length ? `(${rows.length})` : "";
  $("#active-empty").hidden = rows.length > 0;
  tb.innerHTML = rows.map((t) => {
    const pct = t.size > 0 ? Math.min(100, (100 * t.bytes) / t.size) : 0;
    return `<tr data-id="${t.id}" data-file="${esc(t.file)}"><td>${esc(t.proto)}</td><td>${clientCell(t)}</td><td>${esc(t.host)}</td>` +
      `<td>${esc(t.file)}</td><td class="num bytes" data-bytes="${t.bytes}">${bytes(t.bytes)}${t.size > 0 ? " / " + bytes(t.size) : ""}</td>` +
      `<td><div class="bar"><div style="width:${pct.toFixed(1)}%"></div></div></td><td class="num">${mbps(t.mbps)}</td><td class="num">${mbps(t.avg_mbps)}</td></tr>`;
  }).join("");
  renderTFTP(a.tftp);
  if (a.recent_seq !== lastSeq) { lastSeq = a.recent_seq; loadRecent(); }
}
// The TFTP server's requests, transfer threads and what it dropped
// (absent: no TFTP); the refusals by reason in the tooltip.
function renderTFTP(c) {
  const p = $("#tftp-counters");
  p.hidden = !c;
  if (!c) return;
  p.textContent = `TFTP ${c.requests} requests · threads ${c.threads_busy} / ${c.threads_cap}` +
    ` (${c.threaded} transfers on threads, ${c.thread_recvs} datagrams read there, ${c.pinned} on their client's CPU; ${c.polled} in the poller)` +
    ` · dropped ${c.malformed} malformed, ${c.repeated_requests} repeated requests, ${c.stray} stray · ${c.replaced} replaced · ${c.passed_on} passed on · ${c.unsent_errors} errors unsent · ${c.refused} refused`;
  p.title = Object.entries(c.refused_by || {}).map(([r, n]) => `${r}: ${n}`).join("\n");
}
// Milestones: the latest 50, newest first; the stream adds each as it
// happens, the records of kind event fill the list at load.
function milestoneRow(m) {
  const detail = Object.entries(m.detail || {}).filter(([, v]) => v !== "").map(([k, v]) => k + "=" + v).join(" ");
  return `<tr data-what="${esc(m.what)}"><td>${when(m.time)}</td><td>${clientCell({ client_mac: m.mac })}</td><td>${esc(m.host)}</td>` +
    `<td>${esc(m.what)}</td><td>${esc(detail)}</td></tr>`;
}
function addMilestone(m, older) {
  const tb = $("#milestones tbody");
  tb.insertAdjacentHTML(older ? "beforeend" : "afterbegin", milestoneRow(m));
  while (tb.rows.length > 50) tb.deleteRow(-1);
  $("#milestones-empty").hidden = true;
}
// The stored ones go below those the stream brought meanwhile.
async function loadMilestones() {
  try {
    const recs = await getJSON("api/fetches?kind=event&limit=50");
    recs.forEach((r) => addMilestone({ time: r.time, mac: r.client_mac, host: r.host, what: r.file, detail: r.labels }, true));
  } catch (e) { console.warn(e); }
}
let lastSeq = -1;
function connect() {
  const es = new EventSource(withToken("api/active/stream"));
  es.addEventListener("active", (e) => { $("#conn").textContent = "live"; renderActive(JSON.parse(e.data)); });
  es.addEventListener("milestone", (e) => addMilestone(JSON.parse(e.data)));
  es.onerror = () => { $("#conn").textContent = "reconnecting…"; };
}

async function loadRecent() {
  try {
    const r = await getJSON("api/recent");
    const rows = r.fetches.filter((f) => !filters.client || [f.client_mac, f.client_ip, f.host].includes(filters.client))
      .filter((f) => !filters.label || labelMatch(f.labels, filters.label)).slice(0, 50);
    $("#recent tbody").innerHTML = rows.map((f) =>
      `<tr data-file="${esc(f.file)}" data-outcome="${esc(f.outcome)}"><td>${when(f.time)}</td><td>${esc(f.proto)}</td><td>${clientCell(f)}</td><td>${esc(f.host)}</td>` +
      `<td>${esc(f.file)}</td><td class="num">${bytes(f.bytes)}</td><td class="num">${mbps(f.mbps)}</td>` +
      `<td class="${esc(f.outcome)}" title="${esc(f.err)}">${esc(f.outcome)}</td></tr>`).join("");
  } catch (e) { console.warn(e); }
  loadTables();
}
function labelMatch(labels, kv) {
  const [k, v] = kv.split("=");
  return labels && labels[k] === v;
}

async function loadHistory(client) {
  $("#history-section").hidden = false;
  $("#history-client").textContent = client;
  try {
    const recs = await getJSON("api/fetches?" + query({ client, limit: 100 }));
    $("#history tbody").innerHTML = recs.map((f) =>
      `<tr><td>${new Date(f.time).toLocaleString()}</td><td>${esc(f.proto)}</td><td>${esc(f.file)}</td><td class="num">${bytes(f.bytes)}</td>` +
      `<td class="num">${mbps(f.mbps)}</td><td class="${esc(f.outcome)}">${esc(f.outcome)}</td>` +
      `<td>${esc(Object.entries(f.labels || {}).map(([k, v]) => k + "=" + v).join(" "))}</td></tr>`).join("");
  } catch (e) { $("#history tbody").innerHTML = `<tr><td colspan="7" class="muted">${esc(e.message)}</td></tr>`; }
}

async function loadLeases() {
  try {
    const r = await getJSON("api/leases");
    $("#leases tbody").innerHTML = (r.leases || []).map((l) =>
      `<tr><td>${clientCell({ client_mac: l.client_mac })}</td><td>${esc(l.addr || (l.proxy ? "(proxy)" : ""))}</td><td>${esc(l.host)}</td>` +
      `<td>${l.arch === 65535 ? "" : esc(l.arch)}</td><td>${esc(l.boot_file)}</td><td>${l.expiry ? new Date(l.expiry).toLocaleString() : ""}</td></tr>`).join("");
  } catch (e) { console.warn(e); }
}

// Report tables: rows of {label fields..., cells: {column: {median_mbps, best_mbps, count}}}.
let tablesBusy = false;
async function loadTables() {
  if (tablesBusy) return;
  tablesBusy = true;
  try {
    const q = query();
    $("#window-chart").src = withToken("api/chart/window-offload.svg?" + q + "&t=" + Date.now());
    for (const div of document.querySelectorAll(".report")) {
      const name = div.dataset.table;
      try {
        const t = await getJSON("api/report?" + query({ table: name }));
        renderTable(div, t);
      } catch (e) { div.querySelector(".tbl").innerHTML = `<p class="muted">${esc(e.message)}</p>`; }
    }
  } finally { tablesBusy = false; }
}
function rowName(r) {
  return Object.entries(r).filter(([k]) => k !== "cells").map(([, v]) => v).join(" ");
}
function renderTable(div, t) {
  const rows = t.rows || [];
  if (!rows.length) { div.querySelector(".tbl").innerHTML = `<p class="muted">${esc(t.message || "no data")}</p>`; const c = div.querySelector(".chart"); if (c) c.innerHTML = ""; return; }
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r.cells || {})))];
  let h = `<table><thead><tr><th></th>${cols.map((c) => `<th class="num">${esc(c)}</th>`).join("")}</tr></thead><tbody>`;
  for (const r of rows) {
    h += `<tr><th>${esc(rowName(r))}</th>` + cols.map((c) => {
      const s = r.cells[c];
      return `<td class="num">${s ? mbps(s.median_mbps) + ` <span class="muted">(${s.count})</span>` : "-"}</td>`;
    }).join("") + "</tr>";
  }
  div.querySelector(".tbl").innerHTML = h + "</tbody></table>" + (t.notes || []).map((n) => `<p class="muted">${esc(n)}</p>`).join("");
  const chart = div.querySelector(".chart");
  if (chart) chart.innerHTML = bars(rows, cols);
}
// bars draws grouped horizontal bars of the median Mbit/s: one group per row, one bar per column.
function bars(rows, cols) {
  const colors = ["#2f81f7", "#e16f24", "#1a7f37", "#8250df", "#bf3989", "#9a6700"];
  const peak = Math.max(1, ...rows.flatMap((r) => Object.values(r.cells || {}).map((s) => (s ? s.median_mbps : 0))));
  const bh = 12, gap = 8, left = 110, width = 420;
  let y = 20, out = "";
  cols.forEach((c, i) => { out += `<rect x="${left + i * 90}" y="2" width="10" height="10" fill="${colors[i % colors.length]}"/><text x="${left + i * 90 + 14}" y="11">${esc(c)}</text>`; });
  for (const r of rows) {
    out += `<text x="0" y="${y + bh}">${esc(rowName(r))}</text>`;
    cols.forEach((c, i) => {
      const s = r.cells[c];
      const w = s ? (width * s.median_mbps) / peak : 0;
      out += `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${bh - 2}" fill="${colors[i % colors.length]}"/>`;
      if (s) out += `<text x="${left + w + 4}" y="${y + bh - 3}">${mbps(s.median_mbps)}</text>`;
      y += bh;
    });
    y += gap;
  }
  return `<svg class="bars" width="${left + width + 60}" height="${y}" xmlns="http://www.w3.org/2000/svg">${out}</svg>`;
}

$("#filters").addEventListener("submit", (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  filters.client = f.get("client").trim();
  filters.label = f.get("label").trim();
  filters.since = f.get("since");
  loadRecent();
  if (filters.client) loadHistory(filters.client); else $("#history-section").hidden = true;
});
document.addEventListener("click", (e) => {
  const a = e.target.closest("a.client");
  if (a) { loadHistory(a.dataset.client); }
});
$("#history-close").addEventListener("click", () => { $("#history-section").hidden = true; });
connect();
loadMilestones();
loadRecent();
loadLeases();
setInterval(loadLeases, 5000);

// The support page. State lives in the URL fragment (#q=…, #intent=…), so a
// view can be linked and reloaded. The token is asked for once and kept in
// sessionStorage: it lasts as long as the tab and is sent only as the
// Authorization header of same-origin API calls. A #token=… fragment is
// accepted for scripted opening; it is moved into sessionStorage and wiped
// from the address bar and history at once. Fragments never reach the server.
"use strict";

const TOKEN_KEY = "reconciled.support.token";
const $ = (id) => document.getElementById(id);

const ADVICE_STATUS = ["found", "absent", "not_yet", "unreadable", "invalid"];

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null) continue;
    e.append(k instanceof Node ? k : String(k));
  }
  return e;
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(path) {
  const t = token();
  if (!t) throw new APIError(401, "E_TOKEN_MISSING", "Enter the support token to see data.");
  const res = await fetch(path, { headers: { "Authorization": "Bearer " + t }, cache: "no-store" });
  let body = null;
  try { body = await res.json(); } catch (_) { /* not JSON: reported below */ }
  if (!res.ok) {
    const e = (body && body.error) || {};
    if (res.status === 401) throw new APIError(401, e.code || "E_TOKEN", "Token missing or wrong — enter the support token.");
    throw new APIError(res.status, e.code || "E_HTTP", (e.message || res.statusText) + " (" + (e.code || res.status) + ")");
  }
  return body;
}

function statusBadge(st) {
  const s = st || "none";
  return el("span", { class: "status " + s }, s === "none" ? "no verdict yet" : s);
}

function utc(t) {
  // The zero time is Go's "unknown" (an intent known only from verdicts).
  if (!t || String(t).startsWith("0001-")) return "—";
  // Go encodes UTC times with a trailing Z; keep seconds precision for reading.
  return String(t).replace(/\.\d+Z$/, "Z");
}

function intentLink(id) {
  return el("a", { href: "#intent=" + encodeURIComponent(id) }, id);
}

function intentTable(items, extra) {
  if (!items.length) return el("p", { class: "help" }, "None.");
  const head = el("tr", {}, ...["Intent", "Status", "Method", "Canister", "Caller", "First seen (UTC)", "Updated (UTC)"]
    .concat(extra ? [extra.title] : []).map((h) => el("th", { scope: "col" }, h)));
  const rows = items.map((it, i) => el("tr", {},
    el("td", { class: "mono id" }, intentLink(it.intent_id)),
    el("td", {}, statusBadge(it.status)),
    el("td", {}, it.method || "—"),
    el("td", { class: "mono" }, it.canister_id || "—"),
    el("td", { class: "mono" }, it.caller || "—"),
    el("td", { class: "nowrap" }, utc(it.first_seen)),
    el("td", { class: "nowrap" }, utc(it.updated_at)),
    extra ? el("td", {}, extra.cell(i)) : null));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, rows));
}

// pagedList renders a listing and a "More" button that follows next_cursor.
async function pagedList(target, query) {
  const box = el("div");
  target.replaceChildren(box);
  let cursor = "";
  const all = [];
  const more = el("button", { type: "button", class: "more" }, "More");
  async function page() {
    const q = new URLSearchParams(query);
    if (cursor) q.set("cursor", cursor);
    const rep = await api("/api/v1/intents?" + q);
    all.push(...rep.intents);
    cursor = rep.next_cursor;
    box.replaceChildren(intentTable(all));
    if (cursor) box.append(more);
  }
  more.addEventListener("click", () => page().catch(showError));
  await page();
}

async function loadCounts() {
  const c = await api("/api/v1/counts");
  const parts = [];
  for (const k of ["not_yet", "unreadable", "none", "found", "absent", "invalid"]) {
    parts.push(el("span", {}, k === "none" ? "no verdict" : k, ": ", el("b", {}, c.counts[k] || 0)), " · ");
  }
  parts.push(el("span", {}, "open: ", el("b", {}, c.open)), " · ", el("span", {}, "total: ", el("b", {}, c.total)));
  $("counts").replaceChildren(...parts);
}

async function showHome() {
  $("home-view").hidden = false;
  await Promise.all([
    pagedList($("open-list"), { open: "1", order: "newest", limit: "50" }),
    pagedList($("final-list"), { status: "found,absent,invalid", order: "newest", limit: "25" }),
  ]);
}

async function showSearch(q) {
  $("q").value = q;
  $("search-view").hidden = false;
  $("search-h").textContent = "Search results for " + q;
  const rep = await api("/api/v1/search?q=" + encodeURIComponent(q));
  const list = $("search-list");
  list.replaceChildren(intentTable(rep.hits.map((h) => h.intent),
    { title: "Matched by", cell: (i) => rep.hits[i].matches.join(", ").replace(/_/g, " ") }));
  if (rep.truncated) {
    list.append(el("p", { class: "help" }, "Only the newest " + rep.scanned +
      " intents were scanned for block and account matches; older ones may match too."));
  }
}

function fact(dt, dd) { return [el("dt", {}, dt), el("dd", {}, dd === undefined || dd === null || dd === "" ? "—" : dd)]; }

// intentValue is what the intent says for a field the matcher compares.
function intentValue(intent, field) {
  if (!intent) return "—";
  const a = intent.args || {};
  const opt = (v) => (v === undefined || v === null ? "(none)" : String(v));
  switch (field) {
    case "method": return intent.method;
    case "from":
      if (intent.method === "icrc2_transfer_from") return opt(a.from);
      return intent.caller + (a.from_subaccount ? " · subaccount " + a.from_subaccount : "");
    case "spender":
      if (intent.method === "icrc2_approve") return opt(a.spender);
      return intent.caller + (a.spender_subaccount ? " · subaccount " + a.spender_subaccount : "");
    default: return opt(a[field]);
  }
}

// notCompared: an intent without a fee accepts whatever fee the ledger
// charged, so the block's fee is not compared with anything.
function notCompared(intent, field) {
  return field === "fee" && intent && intent.args && (intent.args.fee === null || intent.args.fee === undefined);
}

const COMPARED = ["method", "from", "spender", "to", "amount", "expected_allowance", "expires_at", "fee", "memo"];

function nearMissTable(intent, nm) {
  const differs = new Set(nm.differs || []);
  const fields = COMPARED.filter((f) => differs.has(f) || (f === "method") ||
    (intent && intent.args && Object.prototype.hasOwnProperty.call(intent.args, f)) ||
    (f === "from" && intent && intent.method !== "icrc2_approve"));
  const rows = fields.map((f) => el("tr", { class: differs.has(f) ? "differs" : null },
    el("th", { scope: "row" }, f),
    el("td", { class: "mono" }, intentValue(intent, f)),
    el("td", {}, differs.has(f) ? "differs" : notCompared(intent, f) ? "not compared" : "same")));
  return el("table", { "aria-label": "Near miss block " + nm.index },
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Field"), el("th", { scope: "col" }, "Intent says"),
      el("th", { scope: "col" }, "Block " + nm.index))),
    el("tbody", {}, rows));
}

async function showDetail(id) {
  $("detail-view").hidden = false;
  $("detail-h").textContent = "Intent " + id;
  const d = await api("/api/v1/intents/" + encodeURIComponent(id));
  const st = d.status || "none";
  const out = [];
  out.push(el("p", {}, statusBadge(d.status), d.final ? " final" : " not final", d.latest_seq ? " · verdict #" + d.latest_seq : ""));
  out.push(el("p", { class: "advice " + (ADVICE_STATUS.includes(st) ? st : ""), id: "advice" },
    el("strong", {}, "Tell the person: "), d.advice));

  const intentFacts = el("dl", { class: "facts" },
    fact("Canister", el("span", { class: "mono" }, d.canister_id)),
    fact("Method", d.method),
    fact("Caller", el("span", { class: "mono" }, d.caller)),
    fact("Amount", d.amount ? d.amount.display + (d.amount.display.endsWith(" units") ? "" : " (" + d.amount.units + " units)") : null),
    fact("First seen (UTC)", utc(d.first_seen)),
    fact("Updated (UTC)", utc(d.updated_at)));
  if (!d.has_body) intentFacts.append(...fact("Note", "Known only from verdicts another sidecar decided; its body is not stored here."));

  const b = d.block;
  const blockFacts = el("dl", { class: "facts", id: "block" },
    fact("Index", b ? b.index : null), fact("Time (UTC)", b ? utc(b.time) : null),
    fact("Kind", b ? b.kind : null), fact("Hash", b ? el("span", { class: "mono" }, b.hash) : null));

  const w = d.window;
  const windowFacts = el("dl", { class: "facts", id: "window" },
    fact("From (UTC)", w ? utc(w.from) : null), fact("To (UTC)", w ? utc(w.to) : null),
    fact("First block", w ? w.first_block : null), fact("Last block", w ? w.last_block : null),
    fact("Narrowed by", w ? w.narrowed_by : null));

  const e = d.evidence;
  const evFacts = el("dl", { class: "facts", id: "evidence" },
    fact("Verified by", e ? e.verified : null), fact("Tip index", e ? e.tip_index : null),
    fact("Certified time (UTC)", e ? utc(e.certified_at) : null), fact("Blocks read", e ? e.blocks_read : null));

  out.push(el("div", { class: "cols" },
    el("div", {}, el("h3", {}, "Intent"), intentFacts),
    el("div", {}, el("h3", {}, "Matched block"), blockFacts),
    el("div", {}, el("h3", {}, "Window"), windowFacts),
    el("div", {}, el("h3", {}, "Evidence"), evFacts)));

  if (d.reason) {
    out.push(el("h3", {}, "Reason"), el("p", { id: "reason" }, el("span", { class: "mono" }, d.reason.code), " ",
      d.reason.field ? "(" + d.reason.field + ") " : "", d.reason.message));
  }

  out.push(el("h3", {}, "Near misses"));
  if (!d.near_misses.length) out.push(el("p", { class: "help" }, "None: no block with this stamp and account differs in only some fields."));
  else {
    out.push(el("p", { class: "help" }, "Blocks with the intent's stamp and account that differ in the highlighted fields. They are not the payment."));
    for (const nm of d.near_misses) out.push(nearMissTable(d.intent, nm));
  }

  out.push(el("h3", {}, "Verdict history"));
  out.push(el("table", { id: "history" },
    el("thead", {}, el("tr", {}, ...["Seq", "Status", "Final", "Decided (UTC)", "Block", "Reason"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, d.verdicts.map((v) => el("tr", {},
      el("td", {}, v.seq), el("td", {}, statusBadge(v.status)), el("td", {}, v.final ? "yes" : "no"),
      el("td", {}, utc(v.decided_at)), el("td", {}, v.block ? v.block.index : "—"),
      el("td", {}, v.reason ? v.reason.code + ": " + v.reason.message : "—"))))));

  out.push(el("h3", {}, "Intent as received"), el("pre", { class: "mono" }, d.intent ? JSON.stringify(d.intent, null, 2) : "not stored"));
  $("detail").replaceChildren(...out);
}

function showError(err) {
  const m = $("message");
  m.textContent = err.message || String(err);
  m.hidden = false;
  document.body.dataset.state = "error";
  if (err.status === 401) $("token").focus();
}

async function route() {
  const p = new URLSearchParams(location.hash.slice(1));
  if (p.has("token")) {
    sessionStorage.setItem(TOKEN_KEY, p.get("token"));
    p.delete("token");
    history.replaceState(null, "", location.pathname + (p.toString() ? "#" + p : ""));
  }
  $("logout").hidden = !token();
  $("message").hidden = true;
  for (const v of ["home-view", "search-view", "detail-view"]) $(v).hidden = true;
  document.body.dataset.state = "loading";
  try {
    await loadCounts();
    if (p.get("intent")) await showDetail(p.get("intent"));
    else if (p.get("q")) await showSearch(p.get("q"));
    else await showHome();
    document.body.dataset.state = "ready";
  } catch (err) {
    showError(err);
  }
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  route();
});
$("logout").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); route(); });
$("search").addEventListener("submit", (ev) => {
  ev.preventDefault();
  location.hash = "q=" + encodeURIComponent($("q").value.trim());
});
window.addEventListener("hashchange", route);
route();

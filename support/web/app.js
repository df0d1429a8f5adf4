// The support page. State lives in the URL fragment (#q=…, #intent=…,
// #status=…), so a view can be linked and reloaded. The token is asked for
// once and kept in sessionStorage: it lasts as long as the tab and is sent
// only as the Authorization header of same-origin API calls. A #token=…
// fragment is accepted for scripted opening; it is moved into sessionStorage
// and wiped from the address bar and history at once. Fragments never reach
// the server.
//
// Every view is drawn only from the answer to its own request: a navigation
// starts a new generation, aborts the requests of the old one, and an answer
// that arrives for an old generation is dropped. Until its answer is in, a
// view shows only that it is loading; on an error, only the error.
"use strict";

const TOKEN_KEY = "reconciled.support.token";
const REFRESH_MS = 3000; // open intents and the home page refresh this often
const RETRY_MS = 3000; // while the daemon cannot be reached
const PAGE = 100;
const $ = (id) => document.getElementById(id);

const ADVICE_STATUS = ["found", "absent", "not_yet", "unreadable", "invalid"];
const FINAL = ["found", "absent", "invalid"];

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat(Infinity)) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : String(k));
  }
  return e;
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

// gen is the current navigation; ctl aborts its requests when it ends.
let gen = 0;
let ctl = new AbortController();
let timer = 0;

async function api(path, raw) {
  const t = token();
  if (!t) throw new APIError(401, "E_TOKEN_MISSING", "Enter the support token to see data.");
  let res;
  try {
    res = await fetch(path, { headers: { "Authorization": "Bearer " + t }, cache: "no-store", signal: ctl.signal });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new APIError(0, "E_UNREACHABLE", "Cannot reach the reconciled daemon at " + location.host +
      ". It may be restarting; this page tries again every few seconds.");
  }
  if (raw && res.ok) return res;
  let body = null;
  try { body = await res.json(); } catch (_) { /* not JSON: reported below */ }
  if (!res.ok) {
    const e = (body && body.error) || {};
    if (res.status === 401) throw new APIError(401, e.code || "E_TOKEN", "Token missing or wrong — enter the support token.");
    throw new APIError(res.status, e.code || "E_HTTP", (e.message || res.statusText || "HTTP " + res.status) + " (" + (e.code || res.status) + ")");
  }
  return body;
}

function statusBadge(st) {
  const s = st || "none";
  return el("span", { class: "status " + s }, s === "none" ? "no verdict yet" : s.replace("_", " "));
}

// utc renders a Go time as "2026-11-30 07:05:00 UTC"; "—" for none.
function utc(t) {
  // The zero time is Go's "unknown" (an intent known only from verdicts).
  if (!t || String(t).startsWith("0001-")) return "—";
  return String(t).replace("T", " ").replace(/(\.\d+)?Z$/, " UTC");
}

function memoText(m) {
  if (!m) return "—";
  return m.text ? m.text : "0x" + m.hex;
}

function intentLink(id) {
  return el("a", { href: "#intent=" + encodeURIComponent(id) }, id);
}

// copyButton copies text. Its name says what it copies ("Copy intent id",
// the last words hidden on screen), and the outcome is announced in the
// page's status region as well as shown on the button.
function copyButton(text, what) {
  const label = el("span", {}, "Copy");
  let reset = 0;
  return el("button", {
    type: "button", class: "copy",
    onclick: async (ev) => {
      const b = ev.currentTarget;
      const ok = await copyText(text, b);
      label.textContent = ok ? "Copied" : "Copy failed";
      announce(ok ? "Copied " + what + " to the clipboard." : "Could not copy the " + what + "; select it and copy it by hand.");
      clearTimeout(reset);
      reset = setTimeout(() => { label.textContent = "Copy"; }, 2000);
    },
  }, label, el("span", { class: "sr-only" }, " " + what));
}

// copyText puts text on the clipboard. The clipboard API exists only in a
// secure context; a page served over plain http from a host other than
// localhost falls back to copying a selection, then gives the focus back.
async function copyText(text, from) {
  if (navigator.clipboard && window.isSecureContext) {
    try { await navigator.clipboard.writeText(text); return true; } catch (_) { /* try the selection below */ }
  }
  const ta = el("textarea", { class: "offscreen", readonly: true, "aria-hidden": "true", tabindex: "-1" });
  ta.value = text;
  document.body.append(ta);
  ta.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch (_) { ok = false; }
  ta.remove();
  from.focus();
  return ok;
}

// announce tells a screen reader something that happened without moving
// the focus; the same words twice are announced twice.
function announce(msg) {
  const a = $("announce");
  a.textContent = "";
  setTimeout(() => { a.textContent = msg; }, 50);
}

const COLUMNS = [
  ["Intent", (it) => intentLink(it.intent_id), "id"],
  ["Status", (it) => statusBadge(it.status)],
  ["Amount", (it) => (it.amount ? it.amount.display : "—"), "nowrap"],
  ["From", (it) => acctCell(it.from), "mono acct-cell"],
  ["To", (it) => acctCell(it.to || it.spender), "mono acct-cell"],
  ["Memo", (it) => memoText(it.memo)],
  ["Paid at (UTC)", (it) => when(it.stamp)],
  ["Decided (UTC)", (it) => when(it.decided_at)],
];

// acctCell is an account in a list: whole in the page (and so to a screen
// reader and on a narrow screen's card), cut short with an ellipsis by the
// style sheet where the columns are tight.
function acctCell(a) {
  return a ? el("span", { class: "acct-short", title: a }, a) : "—";
}

// when is a list cell's time: date and time each kept whole, free to go on
// two lines when the columns are tight.
function when(t) {
  const [date, time] = utc(t).replace(" UTC", "").split(" ");
  if (!time) return date;
  // A payment's time ahead of this computer's clock (a tool or, in the
  // demo, a test ledger whose clock runs ahead) says so.
  const ahead = Date.parse(t) - Date.now() > 60000;
  return [el("span", { class: "nowrap" }, date), " ", el("span", { class: "nowrap" }, time),
    ahead ? [" ", el("span", { class: "help ahead" }, "(ahead of this computer's clock)")] : null];
}

function intentTable(items, label, extra) {
  if (!items.length) return el("p", { class: "help" }, "None.");
  const cols = extra ? COLUMNS.concat([extra]) : COLUMNS;
  return el("table", { class: "list", "aria-label": label },
    el("thead", {}, el("tr", {}, cols.map(([h]) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, items.map((it, i) => el("tr", {},
      cols.map(([h, cell, cls]) => el("td", { class: cls, "data-label": h }, cell(it, i)))))));
}

// pagedList draws a listing with a "More" button that follows next_cursor,
// and says how many are shown and whether more exist, so paging never stops
// unnoticed.
function pagedList(path, params, label, extra, pick) {
  const box = el("div", { class: "paged" });
  const all = [];
  const hits = [];
  let cursor = "";
  const more = el("button", { type: "button", class: "more" }, "More");
  const note = el("p", { class: "help", "aria-live": "polite" });
  const myGen = gen;
  async function page() {
    const q = new URLSearchParams(params);
    if (cursor) q.set("cursor", cursor);
    more.disabled = true;
    const rep = await api(path + "?" + q);
    if (myGen !== gen) return rep;
    const rows = pick(rep);
    all.push(...rows.map((r) => r.item));
    hits.push(...rows);
    cursor = rep.next_cursor;
    more.disabled = false;
    note.textContent = all.length + (cursor ? " shown; more match — press More." : all.length === 1 ? " intent." : " intents, all shown.");
    box.replaceChildren(intentTable(all, label, extra && [extra[0], (it, i) => extra[1](hits[i])]), note);
    if (cursor) box.append(more);
    return rep;
  }
  more.addEventListener("click", () => { userPaged = true; page().catch(showError); });
  return { box, first: page };
}

async function loadCounts() {
  const c = await api("/api/v1/counts");
  const parts = [];
  const names = { none: "no verdict", not_yet: "not yet", unreadable: "unreadable", found: "found", absent: "absent", invalid: "invalid" };
  for (const k of ["not_yet", "unreadable", "none", "found", "absent", "invalid"]) {
    parts.push(el("a", { href: "#status=" + k, "data-status": k }, names[k], ": ", el("b", {}, c.counts[k] || 0)), " · ");
  }
  parts.push(el("span", {}, "open: ", el("b", {}, c.open)), " · ", el("span", {}, "total: ", el("b", {}, c.total)));
  return parts;
}

function heading(text) {
  return el("h2", { id: "view-h", tabindex: "-1" }, text);
}

async function viewHome() {
  const open = pagedList("/api/v1/intents", { open: "1", order: "newest", limit: "50" }, "Open intents", null,
    (rep) => rep.intents.map((it) => ({ item: it })));
  const final = pagedList("/api/v1/intents", { status: FINAL.join(","), sort: "decided", order: "newest", limit: "25" },
    "Recent final verdicts", null, (rep) => rep.intents.map((it) => ({ item: it })));
  await Promise.all([open.first(), final.first()]);
  return [
    el("section", { "aria-labelledby": "open-h" },
      el("h2", { id: "open-h" }, "Open intents ", el("span", { class: "help" }, "(no final verdict yet: not yet, unreadable, or none)")),
      el("div", { id: "open-list" }, open.box)),
    el("section", { "aria-labelledby": "final-h" },
      el("h2", { id: "final-h" }, "Recent final verdicts ", el("span", { class: "help" }, "(found, absent, invalid — newest decided first)")),
      el("div", { id: "final-list" }, final.box)),
  ];
}

function exportButtons(params) {
  const go = async (format) => {
    const q = new URLSearchParams(params);
    q.delete("limit");
    q.set("format", format);
    try {
      const res = await api("/api/v1/export?" + q, true);
      const url = URL.createObjectURL(await res.blob());
      const a = el("a", { href: url, download: "intents." + format });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) { showError(err); }
  };
  return el("p", { class: "export" }, "Export this list: ",
    el("button", { type: "button", onclick: () => go("csv") }, "CSV"), " ",
    el("button", { type: "button", onclick: () => go("json") }, "JSON"));
}

// The list's filters, as the fragment carries them: status, ledger, the
// payment's stamp time (from, to: what the list shows as "Paid at"), and
// first seen (since, until; from links only).
function listParams(p) {
  const st = p.get("status") || "";
  const params = { limit: String(PAGE), order: "newest" };
  if (st) params.status = st;
  if (st && st.split(",").every((s) => FINAL.includes(s))) params.sort = "decided";
  for (const k of ["canister", "from", "to", "since", "until"]) if (p.get(k)) params[k] = p.get(k);
  return params;
}

function listTitle(p) {
  const st = p.get("status") || "";
  const what = (st ? st.split(",").map((s) => (s === "none" ? "no-verdict" : s.replace("_", " "))).join(", ") : "all") + " intents";
  const parts = [what[0].toUpperCase() + what.slice(1)];
  if (p.get("canister")) parts.push("on ledger " + p.get("canister"));
  if (p.get("from") || p.get("to")) {
    parts.push("paid" + (p.get("from") ? " from " + utc(p.get("from")) : "") + (p.get("to") ? " to " + utc(p.get("to")) : ""));
  }
  if (p.get("since") || p.get("until")) {
    parts.push("first seen" + (p.get("since") ? " since " + p.get("since") : "") + (p.get("until") ? " until " + p.get("until") : ""));
  }
  return parts.join(" · ");
}

// localTime is a fragment's UTC time as a datetime-local field takes it.
function localTime(s) { return (s || "").replace(/(\.\d+)?Z$/, ""); }

function filterForm(p) {
  const st = p.get("status") || "";
  const ledger = el("input", { id: "f-ledger", name: "canister", value: p.get("canister") || "", class: "mono",
    placeholder: "canister id (empty: all)", autocomplete: "off", spellcheck: "false" });
  const from = el("input", { id: "f-from", name: "from", type: "datetime-local", step: "1", value: localTime(p.get("from")) });
  const to = el("input", { id: "f-to", name: "to", type: "datetime-local", step: "1", value: localTime(p.get("to")) });
  const status = el("select", { id: "f-status", name: "status" },
    ["", "not_yet", "unreadable", "none", "found", "absent", "invalid"].map((s) =>
      el("option", { value: s, selected: s === st }, s === "" ? "any" : s === "none" ? "no verdict" : s.replace("_", " "))));
  const field = (label, input) => el("div", { class: "field" }, label, input);
  return el("form", { class: "filters", "aria-label": "Filters",
    onsubmit: (ev) => {
      ev.preventDefault();
      const q = new URLSearchParams();
      q.set("status", status.value);
      if (ledger.value.trim()) q.set("canister", ledger.value.trim());
      // datetime-local gives a zoneless time; the page speaks UTC throughout.
      if (from.value) q.set("from", from.value + "Z");
      if (to.value) q.set("to", to.value + "Z");
      for (const k of ["since", "until"]) if (p.get(k)) q.set(k, p.get(k));
      const h = q.toString();
      if (location.hash.slice(1) === h) route(true);
      else location.hash = h;
    } },
  field(el("label", { for: "f-status" }, "Status"), status),
  field(el("label", { for: "f-ledger" }, "Ledger"), ledger),
  field(el("label", { for: "f-from" }, "Paid from (UTC)"), from),
  field(el("label", { for: "f-to" }, "to (UTC)"), to),
  el("button", { type: "submit" }, "Filter"));
}

// viewList is a filtered listing: by status (a clicked count), ledger and
// the time the payment was stamped.
async function viewList(p) {
  const params = listParams(p);
  const title = listTitle(p);
  const list = pagedList("/api/v1/intents", params, title, null, (rep) => rep.intents.map((it) => ({ item: it })));
  await list.first();
  return [heading(title), filterForm(p), exportButtons(params), el("div", { id: "list-view" }, list.box)];
}

async function viewSearch(p) {
  const q = p.get("q") || "";
  const params = { limit: String(PAGE) };
  if (q) params.q = q;
  for (const k of ["from", "to", "status", "canister"]) if (p.get(k)) params[k] = p.get(k);
  const title = q ? "Search results for " + q : "Payments stamped " + (p.get("from") ? "from " + utc(p.get("from")) + " " : "") +
    (p.get("to") ? "to " + utc(p.get("to")) : "");
  let readings = [];
  const list = pagedList("/api/v1/search", params, title, ["Matched by", (h) => h.matches.join(", ").replace(/_/g, " ")],
    (rep) => { readings = rep.readings || []; return rep.hits.map((h) => ({ item: h.intent, matches: h.matches })); });
  await list.first();
  const out = [heading(title)];
  if (readings.length) out.push(el("p", { class: "help" }, "Looked for it as: " + readings.join(" · ") + "."));
  out.push(exportButtons(params), el("div", { id: "search-list" }, list.box));
  return out;
}

function fact(dt, ...dd) {
  const v = dd.filter((x) => x !== undefined && x !== null && x !== "");
  return [el("dt", {}, dt), el("dd", {}, v.length ? v : "—")];
}

function link(url, text) { return url ? el("a", { href: url, rel: "noreferrer noopener", target: "_blank" }, text) : null; }

// account shows an account in the form search takes, with copy buttons and
// the ICP ledger's account id.
function account(a) {
  if (!a) return null;
  return el("span", { class: "acct" },
    el("span", { class: "mono" }, a.text), " ", copyButton(a.text, a.role + " account"),
    a.url ? [" ", link(a.url, "explorer")] : null,
    el("br"), el("span", { class: "help" }, "ICP account id "), el("span", { class: "mono small" }, a.icp_account_id), " ",
    copyButton(a.icp_account_id, a.role + " ICP account id"));
}

// intentValue is what the intent says for a field the matcher compares.
function intentValue(d, field) {
  const intent = d.intent;
  if (!intent) return "—";
  const a = intent.args || {};
  switch (field) {
    case "amount": return d.amount ? d.amount.display : String(a.amount);
    case "memo": return d.memo ? memoText(d.memo) : "(none)";
    case "from": return d.from || "—";
    case "to": return d.to || "—";
    case "spender": return d.spender || (intent.method === "icrc2_transfer_from" ? intent.caller : "—");
    case "method": return intent.method;
    default: return a[field] === undefined || a[field] === null ? "(none)" : String(a[field]);
  }
}

function blockValue(nm, field) {
  const b = nm.block;
  if (!b) return "not recorded";
  switch (field) {
    case "amount": return nm.amount ? nm.amount.display : b.amount || "—";
    case "memo": return nm.memo ? memoText(nm.memo) : "(none)";
    case "method": return b.kind;
    case "fee": return b.fee ? b.fee + " units" : "(none)";
    default: return b[field] || "—";
  }
}

const COMPARED = ["method", "from", "spender", "to", "amount", "expected_allowance", "expires_at", "fee", "memo"];

function nearMissTable(d, nm) {
  const differs = new Set(nm.differs || []);
  const fields = COMPARED.filter((f) => differs.has(f) || ["from", "to", "amount", "memo"].includes(f) ||
    (f === "spender" && d.method !== "icrc1_transfer"));
  const rows = fields.map((f) => el("tr", { class: differs.has(f) ? "differs" : null },
    el("th", { scope: "row" }, f, differs.has(f) ? el("span", { class: "tag" }, " differs") : null),
    el("td", { class: "mono" }, intentValue(d, f)),
    el("td", { class: "mono" }, blockValue(nm, f))));
  return el("table", { class: "nm", "aria-label": "Near miss block " + nm.index },
    el("caption", {}, "Block ", nm.url ? link(nm.url, String(nm.index)) : nm.index, nm.time ? " at " + utc(nm.time) : ""),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Field"), el("th", { scope: "col" }, "The intent says"),
      el("th", { scope: "col" }, "Block " + nm.index + " recorded"))),
    el("tbody", {}, rows));
}

function blocksRead(e, w) {
  if (!e) return null;
  if (e.blocks_read === 0 && w && (w.first_block === null || w.first_block === undefined)) {
    return "none yet: the ledger has no block in the window";
  }
  if (e.blocks_read === 0) return "none needed: every block of the window was already verified and cached";
  return e.blocks_read + " fetched and verified for this decision";
}

// ago is how long ago (or from now) t is, as a person says it: "9 min
// ago", "in 5 s". The page's clock is this computer's.
function ago(t) {
  if (!t || String(t).startsWith("0001-")) return "";
  const ms = Date.parse(t) - Date.now();
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 2) return "just now";
  const n = s < 60 ? s + " s" : s < 3600 ? Math.round(s / 60) + " min" : s < 172800 ? Math.round(s / 3600) + " h" :
    Math.round(s / 86400) + " days";
  return ms < 0 ? n + " ago" : "in " + n;
}

// whenFact is a time with how long ago it is and whose clock it is by. A time
// that should be past but lies ahead says so: the clock that gave it runs
// ahead of this computer's.
function whenFact(t, clock, past) {
  const rel = ago(t);
  if (!rel) return "—";
  const ahead = past && Date.parse(t) - Date.now() > 60000;
  return [utc(t), " ", el("span", { class: "rel" }, "(" + rel + ")"),
    clock ? el("span", { class: "help" }, " — by " + clock) : null,
    ahead ? el("strong", { class: "ahead" }, " — ahead of this computer's clock") : null];
}

// OUTCOME is what happened, as a heading says it.
const OUTCOME = { found: "went through", absent: "did not go through", not_yet: "not yet known", unreadable: "not yet known",
  invalid: "could not be checked", none: "not yet known" };

// shortAcct is an account's first characters, to name it in a heading.
function shortAcct(a) { return a ? a.slice(0, 5) + "…" : ""; }

function payHeading(d, st) {
  const amount = d.amount ? d.amount.display : "";
  let what;
  if (d.method === "icrc2_approve") what = amount ? "Approval of " + amount + (d.spender ? " for " + shortAcct(d.spender) : "") : "Approval";
  else what = amount ? amount + (d.to ? " to " + shortAcct(d.to) : "") : "Payment";
  return what + " — " + (d.method === "icrc2_approve" && st === "found" ? "in place" : OUTCOME[st] || "not yet known");
}

// AFTER says in words what the payment tool saw of its call.
const AFTER = {
  "unknown": "no answer: the call's reply was lost",
  "Err.TooOld": "the ledger refused it as too old",
  "Err.TemporarilyUnavailable": "the ledger was temporarily unavailable",
  "Err.CreatedInFuture": "the ledger refused it as created in the future",
  "Err.Duplicate": "the ledger said it was a duplicate of an earlier payment",
};
function afterText(a) {
  if (!a) return null;
  return [AFTER[a] || a, AFTER[a] ? el("span", { class: "help mono" }, " (" + a + ")") : null];
}

// KIND names a block's type in words.
const KIND = { xfer: "transfer", "1xfer": "transfer", "2xfer": "transfer from an allowance", approve: "approval",
  "2approve": "approval", mint: "mint", "1mint": "mint", burn: "burn", "1burn": "burn" };

const VERIFIED = { "certificate+chain": "the ledger's certified tip, then the hash chain down to each block" };

function followUp(w, st) {
  if (!w) return null;
  const every = w.every_seconds ? "checked every " + w.every_seconds + " s" : "";
  let next;
  if (w.at_next_round) next = [whenFact(w.next_check), el("span", { class: "help" }, " — due: checked at the next round")];
  else if (w.late) next = [whenFact(w.next_check), el("strong", {}, " — overdue: no check recorded here since; this daemon may be stopped or busy, or another instance checks this ledger")];
  else next = [whenFact(w.next_check), every ? el("span", { class: "help" }, " — " + every) : null];
  return el("div", {}, el("h3", {}, "Follow-up"), el("dl", { class: "facts", id: "watch" },
    fact("Last check", w.last_check ? whenFact(w.last_check) : "none recorded"),
    fact("Next check", next),
    st === "unreadable" ? fact("Checks so far", String(w.attempts) + " (the history could not be read each time)") : null));
}

async function viewDetail(id) {
  const d = await api("/api/v1/intents/" + encodeURIComponent(id));
  const st = d.status || "none";
  const out = [heading(payHeading(d, st))];
  out.push(el("p", {}, statusBadge(d.status), d.final ? " final" : " not final — this page refreshes by itself",
    d.decided_at ? [" · decided ", ago(d.decided_at)] : "", " · intent ", el("span", { class: "mono" }, d.intent_id), " ",
    copyButton(d.intent_id, "intent id")));
  out.push(el("p", { class: "advice " + (ADVICE_STATUS.includes(st) ? st : ""), id: "advice" },
    el("strong", {}, "Tell the customer: "), d.tell || d.advice));

  const acct = (role) => (d.accounts || []).find((a) => a.role === role);
  out.push(el("h3", {}, d.method === "icrc2_approve" ? "The approval" : "The payment"));
  const facts = el("dl", { class: "facts", id: "payment" },
    fact("Amount", d.amount ? d.amount.display : null, d.amount && !d.amount.display.endsWith(" units") ? el("span", { class: "help" }, " (" + d.amount.units + " base units)") : null),
    fact("From", account(acct("from"))),
    d.method === "icrc2_approve" ? fact("Spender", account(acct("spender"))) : fact("To", account(acct("to"))),
    d.method === "icrc2_transfer_from" ? fact("Spender (caller)", account(acct("spender (caller)"))) : null,
    fact("Memo", d.memo ? [d.memo.text ? el("span", {}, d.memo.text) : null, el("span", { class: "help mono" }, " hex " + (d.memo.hex || "(empty)"))] : "(none)"),
    fact("Created at", d.stamp ? whenFact(d.stamp, "the payment tool's clock", true) : null),
    fact("What the payment tool saw", afterText(d.after)),
    fact("Ledger", d.ledger ? d.ledger.symbol + " ledger " : null, el("span", { class: "mono" }, d.canister_id)),
    fact("First seen here", whenFact(d.first_seen, "this daemon's clock")));
  if (!d.has_body) facts.append(...fact("Note", "Known only from verdicts another instance decided; its body is not stored here."));
  out.push(facts);

  const b = d.block;
  const w = d.window;
  const e = d.evidence;
  out.push(el("div", { class: "cols" },
    el("div", {}, el("h3", {}, "On the ledger"), el("dl", { class: "facts", id: "block" },
      b ? [fact("Recorded at", whenFact(b.time, "the ledger's clock", true)),
        fact("Block", b.url ? link(b.url, String(b.index)) : b.index), fact("Type", KIND[b.kind] || b.kind)]
        : fact("Matching block", st === "absent" ? "none: no block records this payment" : "none found yet"))),
    followUp(d.watch, st)));

  const nms = el("div", { id: "near-misses" });
  if (!d.near_misses.length) nms.append(el("p", { class: "help" }, "None: the ledger holds no other payment from this account created at the same time."));
  else {
    nms.append(el("p", { class: "help" }, "Payments from the same account, created at the same time, that differ in the marked fields. They are not this payment, but money may have moved. Times are by the ledger's clock."));
    for (const nm of d.near_misses) nms.append(nearMissTable(d, nm));
  }
  out.push(el("h3", {}, "Similar payments (near misses)"), nms);

  const eng = el("details", { id: "engineering" }, el("summary", {}, "For engineering: window, evidence, reason, verdict history"),
    el("div", { class: "cols" },
      el("div", {}, el("h4", {}, "Window searched"), el("dl", { class: "facts", id: "window" },
        fact("From", w ? utc(w.from) : null), fact("To", w ? utc(w.to) : null),
        fact("Blocks", w && w.first_block !== null && w.first_block !== undefined ? w.first_block + " to " + w.last_block : null),
        fact("Narrowed by", w ? w.narrowed_by : null))),
      el("div", {}, el("h4", {}, "Evidence"), el("dl", { class: "facts", id: "evidence" },
        fact("Verified by", e ? [VERIFIED[e.verified] || e.verified, el("span", { class: "help mono" }, " (" + e.verified + ")")] : null),
        fact("Ledger tip", e ? e.tip_index : null),
        fact("Certified time", e ? utc(e.certified_at) : null), fact("Blocks", blocksRead(e, w)),
        fact("Block hash", b ? el("span", { class: "mono small" }, b.hash) : null), fact("Block kind", b ? b.kind : null)))),
    d.reason ? [el("h4", {}, "Reason"), el("p", { id: "reason" }, el("span", { class: "mono" }, d.reason.code), " ",
      d.reason.field ? "(" + d.reason.field + ") " : "", d.reason.message)] : null,
    el("p", { class: "help" }, "Advice with block numbers and schedule: " + d.advice),
    el("h4", {}, "Verdict history"),
    el("table", { id: "history", class: "list", "aria-label": "Verdict history" },
      el("thead", {}, el("tr", {}, ...["Seq", "Status", "Final", "Decided (UTC)", "Block", "Reason"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, d.verdicts.map((v) => el("tr", {},
        el("td", { "data-label": "Seq" }, v.seq), el("td", { "data-label": "Status" }, statusBadge(v.status)),
        el("td", { "data-label": "Final" }, v.final ? "yes" : "no"),
        el("td", { "data-label": "Decided (UTC)" }, utc(v.decided_at)), el("td", { "data-label": "Block" }, v.block ? v.block.index : "—"),
        el("td", { "data-label": "Reason" }, v.reason ? v.reason.code + ": " + v.reason.message : "—"))))));
  out.push(eng);

  // The body is shown as the text the API gives, never parsed and drawn:
  // an invalid intent may nest thousands deep or be huge.
  const size = d.body_bytes ? " (" + d.body_bytes + " bytes" + (d.body_truncated ? "; the first 64 KiB shown" : "") + ")" : "";
  const body = el("pre", { class: "mono body", id: "body", tabindex: "0", "aria-label": "Intent as received" });
  body.textContent = d.has_body ? d.body_text : "not stored";
  out.push(el("details", {}, el("summary", {}, "Intent as received" + size), body));
  return { nodes: out, live: !d.final };
}

function showError(err) {
  if (err && err.name === "AbortError") return;
  const m = $("message");
  m.textContent = err.message || String(err);
  m.hidden = false;
  document.body.dataset.state = "error";
  if (err.status === 401) {
    tokenState(true);
    $("token").focus();
  }
}

// tokenState shows the token field when there is no token or the one in use
// was refused; otherwise only that one is in use, and how to forget it.
function tokenState(refused) {
  const has = !!token();
  $("token-ask").hidden = has && !refused;
  $("token-set").hidden = !has || refused;
  $("logout").hidden = !has;
}

// draw runs the view of the fragment p for generation myGen. On refresh it
// keeps what is shown until the new answer is in; otherwise it clears the
// view first, so nothing of the previous view stays under the new heading.
async function draw(p, myGen, refresh) {
  if (!refresh) {
    $("view").replaceChildren();
    $("loading").textContent = "Loading…";
    document.body.dataset.state = "loading";
    $("main").setAttribute("aria-busy", "true");
  }
  let live = false;
  try {
    const [counts, view] = await Promise.all([loadCounts(), (async () => {
      if (p.get("intent")) return viewDetail(p.get("intent"));
      if (isList(p)) return { nodes: await viewList(p) };
      if (isSearch(p)) return { nodes: await viewSearch(p) };
      return { nodes: await viewHome(), live: true };
    })()]);
    if (myGen !== gen) return;
    $("counts").replaceChildren(...counts);
    $("view").replaceChildren(...view.nodes);
    $("message").hidden = true;
    $("asof").textContent = "As of " + utc(new Date().toISOString());
    document.body.dataset.state = "ready";
    live = view.live;
    if (!refresh) {
      const h = $("view-h");
      if (h && focusHeading) h.focus();
    }
  } catch (err) {
    if (myGen !== gen || (err && err.name === "AbortError")) return;
    if (!refresh || err.code === "E_UNREACHABLE") {
      $("view").replaceChildren(...errorView(p, err));
    }
    showError(err);
    if (err.code === "E_UNREACHABLE") live = "retry";
  } finally {
    if (myGen === gen) {
      $("loading").textContent = "";
      $("main").removeAttribute("aria-busy");
    }
  }
  if (myGen === gen && live && !(live === true && userPaged)) {
    clearTimeout(timer);
    // Only open intents and the home page change by themselves; a retry
    // after the daemon was unreachable redraws whatever view this is.
    timer = setTimeout(() => { if (myGen === gen) draw(p, myGen, live !== "retry"); }, live === "retry" ? RETRY_MS : REFRESH_MS);
  }
}

// errorView is a failed view: its heading and nothing else, the message
// being shown above.
function errorView(p, err) {
  if (p.get("intent")) {
    const id = p.get("intent");
    if (err.status === 404) {
      return [heading("Intent " + id), el("p", {}, "No intent " + id + " is stored here. Check the id, or search by amount, memo or account.")];
    }
    return [heading("Intent " + id)];
  }
  // A refused filter keeps its form, holding what was typed, to be corrected.
  if (isList(p)) return [heading(listTitle(p)), filterForm(p)];
  if (p.get("q")) return [heading("Search results for " + p.get("q"))];
  return [];
}

// A fragment with a query is a search; one with a list filter is a list
// (a count's link, the filter form); a time range alone is a search.
function isSearch(p) { return !!(p.get("q") || p.get("from") || p.get("to")); }
function isList(p) { return !p.get("q") && (p.has("status") || ["canister", "since", "until"].some((k) => !!p.get(k))); }

let focusHeading = false;
// userPaged stops the home page's refresh, which would fold the pages away.
let userPaged = false;

function route(fromNavigation) {
  const p = new URLSearchParams(location.hash.slice(1));
  if (p.has("token")) {
    sessionStorage.setItem(TOKEN_KEY, p.get("token"));
    p.delete("token");
    history.replaceState(null, "", location.pathname + (p.toString() ? "#" + p : ""));
  }
  tokenState(false);
  $("message").hidden = true;
  // The search box shows the search on screen, not a list's filters.
  const search = isSearch(p) && !isList(p) && !p.get("intent");
  $("q").value = search ? p.get("q") || "" : "";
  $("from").value = search ? localTime(p.get("from")) : "";
  $("to").value = search ? localTime(p.get("to")) : "";
  gen++;
  ctl.abort();
  ctl = new AbortController();
  clearTimeout(timer);
  focusHeading = fromNavigation === true;
  userPaged = false;
  draw(p, gen, false);
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  route();
});
$("logout").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); route(); });
$("refresh").addEventListener("click", () => route());
$("search").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = new URLSearchParams();
  const text = $("q").value.trim();
  if (text) q.set("q", text);
  // datetime-local gives a zoneless time; the page speaks UTC throughout.
  for (const k of ["from", "to"]) if ($(k).value) q.set(k, $(k).value + "Z");
  if (!q.toString()) { $("q").focus(); return; }
  const h = q.toString();
  if (location.hash.slice(1) === h) route(true);
  else location.hash = h;
});
window.addEventListener("hashchange", () => route(true));
route();

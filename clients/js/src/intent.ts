import { createHash } from "node:crypto";

import { encodeAccount, encodePrincipal, fromHex, parseAccount, parsePrincipal, toHex } from "./text.js";

/** The ledger methods the daemon settles. */
export type Method = "icrc1_transfer" | "icrc2_transfer_from" | "icrc2_approve";

/**
 * An intent as the daemon reads it (docs/protocol.md, "Intent"): accounts in canonical
 * ICRC-1 text, blobs in lower-case hex, numbers as decimal strings, absent
 * options as null.
 */
export interface Intent {
  intent_id: string;
  canister_id: string;
  method: Method;
  caller: string;
  args: Record<string, string | null>;
  after?: string | null;
  ingress_expiry?: string | null;
  arg_hex?: string | null;
}

/** One argument of a preview: what the person was shown and what was sent. */
export interface PreviewArg {
  text?: string;
  raw: unknown;
}

/**
 * The preview of a ledger call, as a tool layer keeps it: every argument as
 * `{ text, raw }` (under `args`, or as a field of the preview itself) and
 * `arg_hex`, the Candid bytes that were sent.
 */
export interface Preview {
  preview_id?: string;
  method: string;
  canister: string | { toText(): string } | { text?: string; raw?: unknown };
  args?: Record<string, PreviewArg | undefined>;
  arg_hex?: string | Uint8Array | null;
  [field: string]: unknown;
}

export interface FromPreviewOptions {
  /** The principal that sent the call (text, or an object with toText()). */
  caller: unknown;
  /** The intent id; by default derived from the preview (stable). */
  intentId?: string;
  /** What the tool layer saw last; default "unknown". */
  after?: string;
  /** The latest ingress expiry (ns) of every envelope sent with these bytes. */
  ingressExpiry?: bigint | string | number;
}

/** Each method's record fields in the standard's order (matcher/intent.go). */
export const ARG_FIELDS: Readonly<Record<Method, readonly string[]>> = {
  icrc1_transfer: ["from_subaccount", "to", "amount", "fee", "memo", "created_at_time"],
  icrc2_transfer_from: ["spender_subaccount", "from", "to", "amount", "fee", "memo", "created_at_time"],
  icrc2_approve: ["from_subaccount", "spender", "amount", "expected_allowance", "expires_at", "fee", "memo", "created_at_time"],
};

type FieldKind = "subaccount" | "account" | "nat" | "nat64" | "blob";

const FIELD_KIND: Readonly<Record<string, FieldKind>> = {
  from_subaccount: "subaccount",
  spender_subaccount: "subaccount",
  from: "account",
  to: "account",
  spender: "account",
  amount: "nat",
  fee: "nat",
  expected_allowance: "nat",
  expires_at: "nat64",
  created_at_time: "nat64",
  memo: "blob",
};

const REQUIRED = new Set(["from", "to", "spender", "amount", "created_at_time"]);
const TOP_FIELDS = new Set(["intent_id", "canister_id", "method", "caller", "args", "after", "ingress_expiry", "arg_hex"]);
const MAX_NAT64 = (1n << 64n) - 1n;
// The daemon's bounds (matcher): the latest stamp any ledger time can reach,
// the longest memo and the largest body its parser reads.
const MAX_STAMP = (1n << 63n) - 1n - 2n * 366n * 24n * 3_600_000_000_000n;
const MAX_MEMO_BYTES = 256;
const MAX_PARSED_BYTES = 64 << 10;

/**
 * The fleet's limit on a published intent's body, in bytes (Go's
 * `queue.MaxIntentBytes`): the intent stream refuses a larger one at
 * publish, the daemon refuses with `E_TOO_LARGE` any that still arrives,
 * and `publishIntent`/`waitFinal` refuse it before publishing.
 */
export const MAX_INTENT_BYTES = 32 << 10;

const INTENT_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** Whether s may be an intent id: `[A-Za-z0-9_-]{1,128}`. */
export function validIntentId(s: unknown): s is string {
  return typeof s === "string" && INTENT_ID.test(s);
}

function isMethod(m: unknown): m is Method {
  return typeof m === "string" && Object.hasOwn(ARG_FIELDS, m);
}

function sha256Hex(b: Uint8Array | string): string {
  return createHash("sha256").update(b).digest("hex");
}

// ---- canonical form and hash (matcher/canonical.go) ----

function canonicalNat(v: unknown, path: string, max?: bigint): string {
  if (typeof v !== "string" || !/^(?:0|[1-9][0-9]*)$/.test(v)) {
    throw new Error(`${path}: want a decimal string without leading zeros, got ${JSON.stringify(v)}`);
  }
  if (max !== undefined && BigInt(v) > max) throw new Error(`${path}: ${v} does not fit in nat64`);
  return v;
}

function canonicalValue(kind: FieldKind, v: unknown, path: string): string {
  switch (kind) {
    case "subaccount": {
      const b = fromHex(String(v), path);
      if (typeof v !== "string" || b.length !== 32) throw new Error(`${path}: want 32 bytes of lower-case hex`);
      return v;
    }
    case "account":
      if (typeof v !== "string") throw new Error(`${path}: want account text`);
      parseAccount(v);
      return v;
    case "nat":
      return canonicalNat(v, path);
    case "nat64":
      return canonicalNat(v, path, MAX_NAT64);
    case "blob":
      if (typeof v !== "string") throw new Error(`${path}: want lower-case hex`);
      fromHex(v, path);
      return v;
  }
}

/**
 * The canonical form the daemon hashes: fixed key order, every optional key
 * present, `after` left out (it only reports what the tool layer saw). Throws
 * when the daemon would not parse the intent either.
 */
export function canonicalIntent(intent: Intent): string {
  for (const k of Object.keys(intent)) {
    if (!TOP_FIELDS.has(k)) throw new Error(`unknown field ${k}`);
  }
  if (!validIntentId(intent.intent_id)) throw new Error(`intent_id: want [A-Za-z0-9_-]{1,128}`);
  parsePrincipal(intent.canister_id);
  parsePrincipal(intent.caller);
  if (!isMethod(intent.method)) throw new Error(`method: ${JSON.stringify(intent.method)} is not settled by the daemon`);
  const fields = ARG_FIELDS[intent.method];
  const args = intent.args;
  if (args === null || typeof args !== "object" || Array.isArray(args)) throw new Error("args: want an object");
  for (const k of Object.keys(args)) {
    if (!fields.includes(k)) throw new Error(`args.${k}: not a field of ${intent.method}'s argument`);
  }
  const parts = fields.map((f) => {
    const v = args[f];
    if (v == null) {
      if (REQUIRED.has(f)) throw new Error(`args.${f} is required`);
      return `${JSON.stringify(f)}:null`;
    }
    const c = canonicalValue(FIELD_KIND[f]!, v, `args.${f}`);
    if (f === "created_at_time" && BigInt(c) > MAX_STAMP) throw new Error("args.created_at_time: after the year 2260, no ledger time can reach it");
    if (f === "memo" && c.length > 2 * MAX_MEMO_BYTES) throw new Error(`args.memo: more than ${MAX_MEMO_BYTES} bytes`);
    return `${JSON.stringify(f)}:${JSON.stringify(c)}`;
  });
  const expiry = intent.ingress_expiry == null ? "null" : JSON.stringify(canonicalNat(intent.ingress_expiry, "ingress_expiry", MAX_NAT64));
  if (expiry === `"0"`) throw new Error("ingress_expiry: 0 is no envelope's expiry");
  let argHex = "null";
  if (intent.arg_hex != null) {
    fromHex(intent.arg_hex, "arg_hex");
    argHex = JSON.stringify(intent.arg_hex);
  }
  if (intent.after != null && typeof intent.after !== "string") throw new Error("after: want a string");
  return (
    `{"intent_id":${JSON.stringify(intent.intent_id)},"canister_id":${JSON.stringify(intent.canister_id)},` +
    `"method":${JSON.stringify(intent.method)},"caller":${JSON.stringify(intent.caller)},` +
    `"args":{${parts.join(",")}},"ingress_expiry":${expiry},"arg_hex":${argHex}}`
  );
}

/** The bytes published for an intent; the same object always gives the same bytes. */
export function encodeIntent(intent: Intent): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(intent));
}

/**
 * The intent's `intent_hash`: lower-case hex SHA-256 of its canonical form.
 * Throws when the daemon would refuse the intent as unreadable; such an
 * intent's verdict carries the hash of the body bytes instead (bodyHash).
 */
export function intentHash(intent: Intent): string {
  return sha256Hex(canonicalIntent(intent));
}

/** SHA-256 of the exact body bytes: the `intent_hash` of an intent that does not parse. */
export function bodyHash(body: Uint8Array): string {
  return sha256Hex(body);
}

/**
 * Every `intent_hash` a verdict of this intent may carry: its canonical hash
 * when it parses, and the hash of its exact bytes (what an `invalid` verdict
 * of a body the daemon cannot read carries). `primary` names it in the
 * publish header.
 */
export function ownHashes(intent: Intent, body: Uint8Array = encodeIntent(intent)): { primary: string; all: Set<string> } {
  const raw = bodyHash(body);
  let canonical: string | undefined;
  try {
    canonical = body.length <= MAX_PARSED_BYTES ? intentHash(intent) : undefined;
  } catch {
    canonical = undefined;
  }
  return { primary: canonical ?? raw, all: new Set(canonical ? [canonical, raw] : [raw]) };
}

// ---- from a preview ----

function unwrapOpt(v: unknown, kind: FieldKind, path: string): unknown {
  // DFINITY's JavaScript agent spells a Candid opt as [] or [value]. For a
  // blob, [] could also be the empty blob, and an absent memo is not an empty
  // one: refuse to guess.
  if (!Array.isArray(v)) return v;
  const bytesLike = kind === "blob" || kind === "subaccount";
  if (v.length === 0) {
    if (kind === "blob") throw new Error(`${path}: [] is ambiguous (no memo, or an empty one): give hex, null or [bytes]`);
    return null;
  }
  if (v.length === 1 && !(bytesLike && typeof v[0] === "number")) return v[0];
  return v;
}

function bytesOf(v: unknown, path: string): Uint8Array {
  if (typeof v === "string") return fromHex(v, path);
  if (v instanceof Uint8Array) return Uint8Array.from(v);
  if (Array.isArray(v) && v.every((x) => Number.isInteger(x) && x >= 0 && x <= 255)) return Uint8Array.from(v as number[]);
  throw new Error(`${path}: want lower-case hex or bytes, got ${JSON.stringify(v)}`);
}

function principalText(v: unknown, path: string): string {
  if (v && typeof v === "object" && typeof (v as { toText?: unknown }).toText === "function") {
    v = (v as { toText(): string }).toText();
  }
  if (typeof v === "string") {
    parsePrincipal(v);
    return v;
  }
  if (v instanceof Uint8Array) return encodePrincipal(v);
  throw new Error(`${path}: want a principal, got ${JSON.stringify(v)}`);
}

function natText(v: unknown, path: string, max?: bigint): string {
  let n: bigint;
  if (typeof v === "bigint") n = v;
  else if (typeof v === "number" && Number.isSafeInteger(v)) n = BigInt(v);
  else if (typeof v === "string" && /^(?:0|[1-9][0-9]*)$/.test(v)) n = BigInt(v);
  else throw new Error(`${path}: want a natural number, got ${JSON.stringify(typeof v === "bigint" ? String(v) : v)}`);
  if (n < 0n || (max !== undefined && n > max)) throw new Error(`${path}: ${n} is out of range`);
  return n.toString();
}

function accountText(v: unknown, path: string): string {
  if (typeof v === "string") {
    parseAccount(v);
    return v;
  }
  if (!v || typeof v !== "object") throw new Error(`${path}: want { owner, subaccount }, got ${JSON.stringify(v)}`);
  const { owner, subaccount } = v as { owner?: unknown; subaccount?: unknown };
  const o = parsePrincipal(principalText(owner, `${path}.owner`));
  const s = unwrapOpt(subaccount, "subaccount", `${path}.subaccount`);
  return encodeAccount(o, s == null ? null : subaccountBytes(s, `${path}.subaccount`));
}

function subaccountBytes(v: unknown, path: string): Uint8Array {
  const b = bytesOf(v, path);
  if (b.length !== 32) throw new Error(`${path}: ${b.length} bytes, want 32`);
  return b;
}

function argFromPreview(kind: FieldKind, raw: unknown, path: string): string | null {
  const v = unwrapOpt(raw, kind, path);
  if (v == null) return null;
  switch (kind) {
    case "subaccount":
      return toHex(subaccountBytes(v, path));
    case "account":
      return accountText(v, path);
    case "nat":
      return natText(v, path);
    case "nat64":
      return natText(v, path, MAX_NAT64);
    case "blob":
      return toHex(bytesOf(v, path));
  }
}

function previewArg(preview: Preview, field: string): unknown {
  const a = preview.args && Object.hasOwn(preview.args, field) ? preview.args[field] : preview[field];
  if (a == null) return null;
  if (typeof a === "object" && !Array.isArray(a) && "raw" in a) return (a as PreviewArg).raw;
  throw new Error(`preview.${field}: want { text, raw }`);
}

/**
 * The stable id of a preview's intent: its preview id (made safe) and 128
 * bits of the hash of everything the intent says, so one call has one id and
 * two calls never share one even when a tool layer reuses preview ids.
 */
function derivedIntentId(previewId: unknown, intent: Intent): string {
  const content = intentHash({ ...intent, intent_id: "x" });
  const prefix = typeof previewId === "string" ? previewId.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 80) : "";
  return `${prefix || "rc"}-${content.slice(0, 32)}`;
}

/**
 * The intent for a call a tool layer previewed and sent: args in the daemon's
 * format from each argument's `raw`, `arg_hex` passed through, and a stable
 * intent id derived from the preview unless one is given.
 */
export function intentFromPreview(preview: Preview, opts: FromPreviewOptions): Intent {
  if (!preview || typeof preview !== "object") throw new TypeError("intentFromPreview: want a preview object");
  const method = preview.method;
  if (!isMethod(method)) throw new Error(`preview.method: ${JSON.stringify(method)} is not icrc1_transfer, icrc2_transfer_from or icrc2_approve`);
  const c = preview.canister as unknown;
  const isArg = typeof c === "object" && c !== null && typeof (c as { toText?: unknown }).toText !== "function";
  const canisterRaw = isArg ? ((c as PreviewArg).raw ?? (c as { text?: unknown }).text) : c;
  const args: Record<string, string | null> = {};
  for (const f of ARG_FIELDS[method]) {
    args[f] = argFromPreview(FIELD_KIND[f]!, previewArg(preview, f), `preview.${f}`);
  }
  if (args.created_at_time == null) throw new Error("preview.created_at_time: required, without the stamp nothing can be settled");
  const intent: Intent = {
    intent_id: "",
    canister_id: principalText(canisterRaw, "preview.canister"),
    method,
    caller: principalText(opts.caller, "caller"),
    args,
    after: opts.after ?? "unknown",
  };
  if (opts.ingressExpiry !== undefined) intent.ingress_expiry = natText(opts.ingressExpiry, "ingressExpiry", MAX_NAT64);
  if (preview.arg_hex != null) intent.arg_hex = toHex(bytesOf(preview.arg_hex, "preview.arg_hex"));
  if (opts.intentId !== undefined) {
    if (!validIntentId(opts.intentId)) throw new Error(`intentId: want [A-Za-z0-9_-]{1,128}, got ${JSON.stringify(opts.intentId)}`);
    intent.intent_id = opts.intentId;
  } else {
    intent.intent_id = derivedIntentId(preview.preview_id, intent);
  }
  canonicalIntent(intent); // what we publish must be what the daemon reads
  return intent;
}

// Principals and ICRC-1 accounts in their canonical textual forms, the way
// the daemon parses and prints them (icrc3/accounttext.go): an intent's hash
// is computed over these texts, so one spelling per account is essential.

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE), the checksum of principal and account texts. */
export function crc32(...parts: Uint8Array[]): number {
  let c = 0xffffffff;
  for (const p of parts) {
    for (const b of p) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  }
  return (c ^ 0xffffffff) >>> 0;
}

const B32 = "abcdefghijklmnopqrstuvwxyz234567";

/** RFC 4648 base32, lower case, no padding. */
export function base32Encode(b: Uint8Array): string {
  let out = "";
  let acc = 0;
  let bits = 0;
  for (const x of b) {
    acc = (acc << 8) | x;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += B32[(acc >>> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += B32[(acc << (5 - bits)) & 31];
  return out;
}

function base32Decode(s: string): Uint8Array {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const ch of s) {
    const v = B32.indexOf(ch);
    if (v < 0) throw new Error(`not base32: ${JSON.stringify(ch)}`);
    acc = (acc << 5) | v;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >>> bits) & 0xff);
    }
    acc &= (1 << bits) - 1;
  }
  return Uint8Array.from(out);
}

function be32(n: number): Uint8Array {
  return Uint8Array.of(n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}

/** Lower-case hex of b. */
export function toHex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("hex");
}

/** Decodes lower-case hex only, so that every blob has one spelling. */
export function fromHex(s: string, what = "hex"): Uint8Array {
  if (!/^(?:[0-9a-f]{2})*$/.test(s)) throw new Error(`${what}: want lower-case hex of whole bytes, got ${JSON.stringify(s)}`);
  return Uint8Array.from(Buffer.from(s, "hex"));
}

/** The longest principal the IC issues (self-authenticating ids). */
const MAX_PRINCIPAL_BYTES = 29;

/** The textual form of a principal's bytes. */
export function encodePrincipal(raw: Uint8Array): string {
  if (raw.length > MAX_PRINCIPAL_BYTES) throw new Error(`principal of ${raw.length} bytes, at most ${MAX_PRINCIPAL_BYTES}`);
  const body = new Uint8Array(4 + raw.length);
  body.set(be32(crc32(raw)), 0);
  body.set(raw, 4);
  const s = base32Encode(body);
  return s.match(/.{1,5}/g)!.join("-");
}

/**
 * Parses a principal's text, accepting only the canonical spelling (lower
 * case, groups of five, valid checksum), as the daemon does.
 */
export function parsePrincipal(text: string): Uint8Array {
  if (typeof text !== "string" || text.length === 0) throw new Error(`principal: want text, got ${JSON.stringify(text)}`);
  let body: Uint8Array;
  try {
    body = base32Decode(text.replaceAll("-", ""));
  } catch (err) {
    throw new Error(`principal ${JSON.stringify(text)}: ${(err as Error).message}`);
  }
  if (body.length < 4) throw new Error(`principal ${JSON.stringify(text)}: too short`);
  const raw = body.subarray(4);
  if (raw.length > MAX_PRINCIPAL_BYTES) throw new Error(`principal ${JSON.stringify(text)}: ${raw.length} bytes, at most ${MAX_PRINCIPAL_BYTES}`);
  const want = crc32(raw);
  const got = ((body[0]! << 24) | (body[1]! << 16) | (body[2]! << 8) | body[3]!) >>> 0;
  if (want !== got) throw new Error(`principal ${JSON.stringify(text)}: wrong checksum`);
  if (encodePrincipal(raw) !== text) throw new Error(`principal ${JSON.stringify(text)} is not in canonical form`);
  return Uint8Array.from(raw);
}

function isDefaultSubaccount(sub: Uint8Array | null | undefined): boolean {
  return sub == null || sub.every((b) => b === 0);
}

/**
 * The canonical ICRC-1 text of an account: the bare principal for the
 * default (absent or all-zero) subaccount, else
 * `principal-checksum.subaccounthex` with the hex's leading zeros stripped.
 */
export function encodeAccount(owner: Uint8Array, subaccount?: Uint8Array | null): string {
  const o = encodePrincipal(owner);
  if (isDefaultSubaccount(subaccount)) return o;
  if (subaccount!.length !== 32) throw new Error(`subaccount of ${subaccount!.length} bytes, want 32`);
  const checksum = base32Encode(be32(crc32(owner, subaccount!)));
  return `${o}-${checksum}.${toHex(subaccount!).replace(/^0+/, "")}`;
}

/** An account parsed from its text; subaccount is null for the default one. */
export interface ParsedAccount {
  owner: Uint8Array;
  subaccount: Uint8Array | null;
}

/** Parses an account's canonical text, refusing every other spelling. */
export function parseAccount(text: string): ParsedAccount {
  if (typeof text !== "string") throw new Error(`account: want text, got ${typeof text}`);
  const dot = text.indexOf(".");
  if (dot < 0) return { owner: parsePrincipal(text), subaccount: null };
  const head = text.slice(0, dot);
  const subHex = text.slice(dot + 1);
  const dash = head.lastIndexOf("-");
  if (dash < 0) throw new Error(`account ${JSON.stringify(text)}: no checksum before '.'`);
  const owner = parsePrincipal(head.slice(0, dash));
  if (!/^[1-9a-f][0-9a-f]{0,63}$/.test(subHex)) {
    throw new Error(`account ${JSON.stringify(text)}: subaccount hex must be 1-64 lower-case digits without a leading zero`);
  }
  const sub = fromHex(subHex.padStart(64, "0"));
  const want = encodeAccount(owner, sub);
  if (want !== text) throw new Error(`account ${JSON.stringify(text)}: not canonical (want ${JSON.stringify(want)})`);
  return { owner, subaccount: sub };
}

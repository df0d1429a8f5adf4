// The client's principal, account and intent-hash code against vectors
// computed by the daemon's Go code (js_test.go keeps vectors.json current).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";

import {
  bodyHash,
  canonicalIntent,
  encodeAccount,
  encodeIntent,
  encodePrincipal,
  intentFromPreview,
  intentHash,
  intentMsgId,
  IntentRejectedError,
  MAX_INTENT_BYTES,
  ownHashes,
  parseAccount,
  parsePrincipal,
  publishIntent,
  waitFinal,
  type Intent,
} from "../src/index.js";

interface Vectors {
  principals: { hex: string; text: string }[];
  accounts: { owner: string; subaccount: string | null; text: string }[];
  intents: { name: string; body: string; hash: string; body_hash: string; error?: string }[];
}

const vectors = JSON.parse(readFileSync(new URL("../../test/vectors.json", import.meta.url), "utf8")) as Vectors;
const hex = (s: string) => Uint8Array.from(Buffer.from(s, "hex"));

test("principal text matches the Go encoding both ways", () => {
  assert.ok(vectors.principals.length > 30);
  for (const p of vectors.principals) {
    assert.equal(encodePrincipal(hex(p.hex)), p.text, p.hex);
    assert.deepEqual(Buffer.from(parsePrincipal(p.text)).toString("hex"), p.hex);
  }
});

test("non-canonical principal spellings are refused", () => {
  const t = vectors.principals[2]!.text; // rrkah-fqaaa-aaaaa-aaaaq-cai
  for (const bad of [t.toUpperCase(), t.replaceAll("-", ""), t.slice(0, -1) + "a", `${t}-`, ""]) {
    assert.throws(() => parsePrincipal(bad), Error, bad);
  }
});

test("account text matches the Go encoding both ways", () => {
  for (const a of vectors.accounts) {
    const owner = parsePrincipal(a.owner);
    assert.equal(encodeAccount(owner, a.subaccount === null ? null : hex(a.subaccount)), a.text);
    const back = parseAccount(a.text);
    assert.equal(encodePrincipal(back.owner), a.owner);
    const isDefault = a.subaccount === null || /^0+$/.test(a.subaccount);
    assert.equal(back.subaccount === null ? null : Buffer.from(back.subaccount).toString("hex"), isDefault ? null : a.subaccount);
  }
});

test("non-canonical account spellings are refused", () => {
  const withSub = vectors.accounts.find((a) => a.text.includes("."))!.text;
  const [head, sub] = withSub.split(".");
  const dash = head!.lastIndexOf("-");
  const badChecksum = `${head!.slice(0, dash)}-${head!.slice(dash + 1).split("").reverse().join("")}.${sub}`;
  for (const bad of [`${head}.0${sub}`, withSub.toUpperCase(), badChecksum, `${head}.`, `${vectors.accounts[0]!.owner}.1`]) {
    assert.throws(() => parseAccount(bad), Error, bad);
  }
});

test("intent_hash matches the daemon's for every intent it parses", () => {
  for (const v of vectors.intents) {
    let body: unknown;
    try {
      body = JSON.parse(v.body);
    } catch {
      assert.ok(v.error, `${v.name}: not JSON, yet the daemon parsed it`);
      continue;
    }
    const intent = body as Intent;
    assert.equal(bodyHash(new TextEncoder().encode(v.body)), v.body_hash, v.name);
    if (v.hash) {
      assert.equal(intentHash(intent), v.hash, v.name);
      // What the client publishes (its own serialisation) carries the same hash.
      assert.ok(ownHashes(intent).all.has(v.hash), v.name);
      assert.equal(intentMsgId(intent), `${intent.intent_id}:${v.hash}`);
    } else {
      // The client refuses what the daemon refuses (all but a disagreeing
      // arg_hex, which takes a Candid decoder to see), so both name such a
      // body by the hash of its bytes in Nats-Msg-Id.
      if (!v.error!.includes("E_ARGS_MISMATCH")) assert.throws(() => canonicalIntent(intent), Error, v.name);
      // The daemon answers such a body with the hash of its exact bytes.
      assert.ok(ownHashes(intent).all.has(bodyHash(encodeIntent(intent))), v.name);
    }
  }
});

test("the canonical form leaves `after` out and every optional key in", () => {
  const v = vectors.intents[0]!;
  const c = canonicalIntent(JSON.parse(v.body) as Intent);
  assert.ok(!c.includes("after"));
  assert.ok(c.includes(`"ingress_expiry":null,"arg_hex":null}`));
});

test("intentFromPreview builds the daemon's intent from a tool layer's preview", () => {
  const v = vectors.intents.find((x) => x.name === "transfer with arg_hex")!;
  const want = JSON.parse(v.body) as Intent;
  const to = parseAccount(want.args.to!);
  const preview = {
    preview_id: "pv 7/lunch",
    method: "icrc1_transfer",
    canister: want.canister_id,
    args: {
      to: { text: "Bob", raw: { owner: encodePrincipal(to.owner), subaccount: Buffer.from(to.subaccount!).toString("hex") } },
      amount: { text: "1.5 ckBTC", raw: "150000000" },
      memo: { text: "lunch", raw: "6c756e6368" },
      created_at_time: { text: "2026-10-10", raw: "1791547201000000000" },
      from_subaccount: { text: "default", raw: null },
    },
    arg_hex: want.arg_hex!,
  };
  const intent = intentFromPreview(preview, { caller: want.caller, intentId: "x" });
  assert.equal(intentHash(intent), v.hash);
  assert.deepEqual(intent.args, { from_subaccount: null, to: want.args.to, amount: "150000000", fee: null, memo: "6c756e6368", created_at_time: "1791547201000000000" });

  // The derived id is stable, valid, and names the preview.
  const a = intentFromPreview(preview, { caller: want.caller });
  const b = intentFromPreview(structuredClone(preview), { caller: want.caller });
  assert.equal(a.intent_id, b.intent_id);
  assert.match(a.intent_id, /^pv_7_lunch-[0-9a-f]{32}$/);
  // Another call (another amount) gets another id even under the same preview id.
  const other = structuredClone(preview);
  other.args.amount.raw = "150000001";
  assert.notEqual(intentFromPreview(other, { caller: want.caller }).intent_id, a.intent_id);

  // Principals may be objects with toText(), as DFINITY's agent gives them.
  const asObj = (t: string) => ({ toText: () => t });
  const objPreview = { ...preview, canister: asObj(want.canister_id), args: { ...preview.args, to: { raw: { owner: asObj(encodePrincipal(to.owner)), subaccount: [to.subaccount!] } } } };
  assert.equal(intentHash(intentFromPreview(objPreview, { caller: asObj(want.caller), intentId: "x" })), v.hash);

  // Arguments may also sit on the preview itself, in DFINITY's opt spelling.
  const flat = { preview_id: "p", method: "icrc1_transfer", canister: want.canister_id, arg_hex: want.arg_hex!, ...preview.args, from_subaccount: { raw: [] } };
  delete (flat as { args?: unknown }).args;
  assert.equal(intentHash(intentFromPreview(flat, { caller: want.caller, intentId: "x" })), v.hash);
});

test("intentFromPreview refuses what it cannot represent faithfully", () => {
  const base = vectors.intents[0]!;
  const want = JSON.parse(base.body) as Intent;
  const preview = (over: Record<string, unknown>) => ({
    method: "icrc1_transfer",
    canister: want.canister_id,
    args: { to: { raw: { owner: want.caller } }, amount: { raw: "1" }, created_at_time: { raw: "5" }, ...over },
  });
  assert.throws(() => intentFromPreview(preview({ created_at_time: { raw: null } }), { caller: want.caller }), /created_at_time/);
  assert.throws(() => intentFromPreview(preview({ memo: { raw: [] } }), { caller: want.caller }), /ambiguous/);
  assert.throws(() => intentFromPreview(preview({ amount: { raw: "-1" } }), { caller: want.caller }), /amount/);
  assert.throws(() => intentFromPreview(preview({ amount: { raw: 1.5 } }), { caller: want.caller }), /amount/);
  assert.throws(() => intentFromPreview(preview({ memo: { raw: "6C" } }), { caller: want.caller }), /hex/);
  assert.throws(() => intentFromPreview(preview({}), { caller: want.caller.toUpperCase() }), /principal/);
  assert.throws(() => intentFromPreview({ ...preview({}), method: "icrc1_balance_of" }, { caller: want.caller }), /method/);
  assert.throws(() => intentFromPreview(preview({}), { caller: want.caller, intentId: "a.b" }), /intentId/);
  // An empty memo is a memo.
  assert.equal(intentFromPreview(preview({ memo: { raw: "" } }), { caller: want.caller }).args.memo, "");
  // Amounts above 2^53 stay exact.
  assert.equal(intentFromPreview(preview({ amount: { raw: 2n ** 70n } }), { caller: want.caller }).args.amount, (2n ** 70n).toString());
});

test("an intent over the fleet's size limit is refused before it is published", async () => {
  const v = vectors.intents[0]!;
  const base = JSON.parse(v.body) as Intent;
  const fits = { ...base, after: "" };
  const room = MAX_INTENT_BYTES - encodeIntent(fits).length;
  const atLimit = { ...base, after: "x".repeat(room) };
  assert.equal(encodeIntent(atLimit).length, MAX_INTENT_BYTES);
  const over = { ...base, after: "x".repeat(room + 1) };
  // Never reaches the JetStream client: nothing is published.
  const js = {} as JetStreamClient;
  await assert.rejects(publishIntent(js, over), (err: unknown) => err instanceof IntentRejectedError && err.code === "E_TOO_LARGE");
  await assert.rejects(waitFinal(js, over, { nc: {} as NatsConnection }), (err: unknown) => err instanceof IntentRejectedError && err.code === "E_TOO_LARGE");
  await assert.rejects(publishIntent(js, atLimit), (err: unknown) => !(err instanceof IntentRejectedError));
});

// The client against the real daemon and the test replica, on loopback.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { jetstream, type JetStreamClient } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";

import {
  bodyHash,
  createReconcileHook,
  encodeAccount,
  encodeIntent,
  IntentConflictError,
  intentFromPreview,
  intentHash,
  InvalidIntentError,
  parsePrincipal,
  publishIntent,
  ReconcileTimeoutError,
  ReconcileTransportError,
  rejectSubject,
  verdictSubject,
  waitFinal,
  watchVerdicts,
  type Intent,
  type Preview,
  type Reject,
  type Verdict,
} from "../src/index.js";
import { startWorld, type World } from "./world.js";

const HOUR_NS = 3_600_000_000_000n;

let world: World;
let nc: NatsConnection;
let js: JetStreamClient;
// The recipient: another principal's subaccount, so the account text carries a checksum.
let to: { owner: string; subaccount: string; text: string };

before(async () => {
  world = await startWorld();
  nc = await connect({ servers: world.natsURL, name: "client-test" });
  js = jetstream(nc);
  const owner = "rrkah-fqaaa-aaaaa-aaaaq-cai";
  const subaccount = "00000000000000000000000000000000000000000000000000000000000a11ce";
  to = { owner, subaccount, text: encodeAccount(parsePrincipal(owner), Buffer.from(subaccount, "hex")) };
});

after(async () => {
  await nc?.close();
  await world?.close();
});

/** A tool layer's preview of an icrc1_transfer, from the arguments it sent. */
function transferPreview(id: string, amount: string, memo: string, stamp: bigint, argHex?: string): Preview {
  return {
    preview_id: id,
    method: "icrc1_transfer",
    canister: world.canister,
    args: {
      from_subaccount: { text: "main account", raw: null },
      to: { text: `Alice (${to.text})`, raw: { owner: to.owner, subaccount: to.subaccount } },
      amount: { text: `${Number(amount) / 1e8} tokens`, raw: amount },
      fee: { text: "default fee", raw: null },
      memo: { text: Buffer.from(memo, "hex").toString(), raw: memo },
      created_at_time: { text: new Date(Number(stamp / 1_000_000n)).toISOString(), raw: stamp.toString() },
    },
    ...(argHex !== undefined ? { arg_hex: argHex } : {}),
  };
}

/** Resolves with the intent's first verdict whose status is in want (this body's only). */
async function firstVerdict(intent: Intent, want: string[]): Promise<Verdict> {
  const ctl = new AbortController();
  let got: Verdict | undefined;
  await assert.rejects(
    waitFinal(js, intent, {
      signal: ctl.signal,
      timeoutMs: 60_000,
      onVerdict: (v) => {
        if (want.includes(v.status)) {
          got = v;
          ctl.abort();
        }
      },
    }),
    (err: Error) => err.name === "AbortError" || (err as { code?: string }).code === "ABORT_ERR",
  );
  assert.ok(got);
  return got;
}

let paid: { preview: Preview; block: string; stamp: bigint };

test("a transfer made on the test ledger is found through the hook", async () => {
  const stamp = await world.now();
  const memo = Buffer.from("lunch").toString("hex");
  const sent = await world.pay({ to: to.text, amount: "150000000", memo, createdAtTime: stamp });
  assert.equal(sent.caller, world.payer);
  const preview = transferPreview("pv-lunch", "150000000", memo, stamp, sent.arg_hex);
  paid = { preview, block: sent.block, stamp };

  const reconcile = createReconcileHook({ nc, caller: world.payer, waitMs: 60_000 });
  const r = await reconcile({ canister: world.canister, method: "icrc1_transfer", value: "150000000", stamp, preview });
  assert.equal(r.status, "found");
  assert.ok(r.status === "found");
  assert.equal(r.block.index, sent.block);
  assert.match(r.block.hash, /^[0-9a-f]{64}$/);
  assert.match(r.block.kind, /^1?xfer$/);
  assert.ok(BigInt(r.block.ts) >= stamp);

  // The verdict names this very body.
  const intent = intentFromPreview(preview, { caller: world.payer });
  const v = await waitFinal(js, intent, { timeoutMs: 30_000 });
  assert.equal(v.intent_hash, intentHash(intent));
  assert.equal(v.block?.index, sent.block);
  // arg_hex gave the exact bytes sent: matched as the ledger deduplicates.
  assert.equal(v.block?.match, "exact");

  // Asking again is answered from the stored verdict.
  assert.deepEqual(await reconcile({ canister: world.canister, method: "icrc1_transfer", value: "150000000", stamp, preview }), r);
});

test("a never-sent intent is not_yet, then absent once the ledger clock passes the window", async () => {
  const stamp = await world.now();
  const preview = transferPreview("pv-never", "7", "6e65766572", stamp);
  const intent = intentFromPreview(preview, { caller: world.payer });
  const notYet = await firstVerdict(intent, ["not_yet"]);
  assert.equal(notYet.final, false);
  assert.ok(BigInt(notYet.window!.to_ts) > stamp + 24n * HOUR_NS);

  const reconcile = createReconcileHook({ nc, caller: world.payer, waitMs: 1_000 });
  assert.deepEqual(await reconcile({ canister: world.canister, method: "icrc1_transfer", stamp, preview }), { status: "not_yet" });

  // The window is stamp − 2 min .. stamp + 24 h + 2 min: pass it.
  await world.advance(25n * HOUR_NS);
  const patient = createReconcileHook({ nc, caller: world.payer, waitMs: 60_000 });
  assert.deepEqual(await patient({ canister: world.canister, method: "icrc1_transfer", stamp, preview }), { status: "absent" });

  // The watch starts with the latest verdict, the final one.
  for await (const v of watchVerdicts(js, intent.intent_id)) {
    assert.equal(v.status, "absent");
    assert.equal(v.final, true);
    assert.ok(v.seq > notYet.seq);
    break;
  }
});

test("an intent the daemon cannot read is invalid, with the hash of its exact bytes", async () => {
  // No created_at_time: nothing to match on.
  const intent = {
    intent_id: "js-invalid-no-stamp",
    canister_id: world.canister,
    method: "icrc1_transfer",
    caller: world.payer,
    args: { to: to.text, amount: "1" },
  } as Intent;
  const v = await waitFinal(js, intent, { timeoutMs: 30_000 });
  assert.equal(v.status, "invalid");
  assert.equal(v.final, true);
  assert.equal(v.reason?.code, "E_NO_STAMP");
  assert.equal(v.intent_hash, bodyHash(encodeIntent(intent)));

  // Through the hook: arguments that disagree with the bytes sent are refused, not answered.
  const bad = structuredClone(paid.preview);
  bad.args!.amount!.raw = "150000001";
  const reconcile = createReconcileHook({ nc, caller: world.payer, waitMs: 30_000 });
  await assert.rejects(reconcile({ canister: world.canister, method: "icrc1_transfer", stamp: paid.stamp, preview: bad }), (err: Error) => {
    assert.ok(err instanceof InvalidIntentError, String(err));
    assert.equal(err.code, "E_ARGS_MISMATCH");
    return true;
  });
});

test("a conflicting body under the same id is refused, never answered with the other body's verdict", async () => {
  const first = intentFromPreview(paid.preview, { caller: world.payer, intentId: "js-conflict" });
  const found = await waitFinal(js, first, { timeoutMs: 30_000 });
  assert.equal(found.status, "found");

  // Same id, another amount, inside the stream's dedup window.
  const other = intentFromPreview(transferPreview("pv-other", "150000001", "6c756e6368", paid.stamp), { caller: world.payer, intentId: "js-conflict" });
  const rejects: Reject[] = [];
  const sub = nc.subscribe(rejectSubject("js-conflict"), { callback: (_e, m) => void rejects.push(m.json<Reject>()) });
  await nc.flush();
  await assert.rejects(waitFinal(js, other, { timeoutMs: 30_000 }), (err: Error) => {
    assert.ok(err instanceof IntentConflictError, String(err));
    assert.equal(err.code, "E_INTENT_CONFLICT");
    return true;
  });
  // The other body was not dropped as a duplicate: it reached the daemon, which refused it.
  const ack = await publishIntent(js, other);
  assert.equal(ack.duplicate, true, "waitFinal published it already");
  const deadline = Date.now() + 30_000;
  while (!rejects.some((r) => r.code === "E_INTENT_CONFLICT") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  sub.unsubscribe();
  assert.ok(rejects.some((r) => r.code === "E_INTENT_CONFLICT"), "the daemon published no E_INTENT_CONFLICT");

  // The hook refuses too, whatever it had learnt before.
  const reconcile = createReconcileHook({ nc, caller: world.payer, waitMs: 30_000, intentId: () => "js-conflict" });
  await assert.rejects(reconcile({ canister: world.canister, method: "icrc1_transfer", stamp: paid.stamp, preview: transferPreview("pv-other", "150000001", "6c756e6368", paid.stamp) }), IntentConflictError);
  // The first body is still answered with its own verdict.
  assert.equal((await waitFinal(js, first, { timeoutMs: 30_000 })).status, "found");
});

test("a verdict decided for another body is never acted on", async () => {
  // A verdict stream message naming another body's hash, e.g. one written
  // for an earlier intent that reused this id.
  const id = "js-foreign-verdict";
  const forged = {
    intent_id: id, seq: 1, status: "found", final: true, intent_hash: "00".repeat(32),
    block: { index: "1", ts: "1", hash: "11".repeat(32), kind: "xfer" },
    near_misses: null, window: null, evidence: null, reason: null, decided_at: new Date().toISOString(),
  };
  await js.publish(verdictSubject(id), JSON.stringify(forged), { msgID: `${id}:1` });
  const intent = intentFromPreview(paid.preview, { caller: world.payer, intentId: id });
  await assert.rejects(waitFinal(js, intent, { timeoutMs: 30_000, publish: false }), (err: Error) => {
    assert.ok(err instanceof IntentConflictError, String(err));
    assert.equal(err.source, "verdict");
    return true;
  });
});

test("E_INTENT_CONFLICT on the rejects subject is surfaced as an error", async () => {
  // The refusal a daemon publishes when another body's verdict is not in
  // the stream yet. Core NATS keeps nothing, so it is repeated until the
  // wait, subscribed by then, has seen it.
  const id = "js-rejected-first";
  const intent = intentFromPreview(paid.preview, { caller: world.payer, intentId: id });
  const waiting = waitFinal(js, intent, { timeoutMs: 30_000, publish: false });
  let settled = false;
  const outcome = waiting.then(
    () => assert.fail("resolved"),
    (err: unknown) => err,
  ).finally(() => (settled = true));
  const reject: Reject = { intent_id: id, code: "E_INTENT_CONFLICT", message: "intent js-rejected-first is already stored with another body" };
  while (!settled) {
    nc.publish(rejectSubject(id), JSON.stringify(reject));
    await new Promise((r) => setTimeout(r, 20));
  }
  const err = await outcome;
  assert.ok(err instanceof IntentConflictError, String(err));
  assert.equal(err.source, "reject");
});

test("a timeout throws, and the hook answers it with a non-final status, never absent", async () => {
  const stamp = await world.now();
  const intent = intentFromPreview(transferPreview("pv-timeout", "9", "74696d656f7574", stamp), { caller: world.payer });
  const started = Date.now();
  await assert.rejects(waitFinal(js, intent, { timeoutMs: 500 }), (err: Error) => {
    assert.ok(err instanceof ReconcileTimeoutError, String(err));
    assert.equal(err.code, "E_TIMEOUT");
    return true;
  });
  assert.ok(Date.now() - started >= 500);

  // An id nobody ever published: no verdict at all.
  const silent = { ...intent, intent_id: "js-never-published" };
  await assert.rejects(waitFinal(js, silent, { timeoutMs: 300, publish: false }), (err: Error) => {
    assert.ok(err instanceof ReconcileTimeoutError);
    assert.equal(err.latest, undefined);
    return true;
  });

  const reconcile = createReconcileHook({ nc, caller: world.payer, waitMs: 300 });
  const r = await reconcile({ canister: world.canister, method: "icrc1_transfer", stamp, preview: transferPreview("pv-timeout-2", "10", "74696d656f7574", stamp) });
  assert.ok(r.status === "not_yet" || r.status === "unreadable", r.status);
});

test("a transport error throws, never absent", async () => {
  const nc2 = await connect({ servers: world.natsURL, name: "client-test-closing" });
  const js2 = jetstream(nc2);
  const stamp = await world.now();
  const intent = intentFromPreview(transferPreview("pv-transport", "11", "7472616e73706f7274", stamp), { caller: world.payer });
  const waiting = waitFinal(js2, intent, { timeoutMs: 60_000, onVerdict: () => void nc2.close() });
  await assert.rejects(waiting, (err: Error) => {
    assert.ok(err instanceof ReconcileTransportError, String(err));
    assert.equal(err.latest?.status, "not_yet");
    return true;
  });
});

test("a mismatched hook call is refused before anything is published", async () => {
  const reconcile = createReconcileHook({ nc, caller: world.payer, waitMs: 1_000 });
  await assert.rejects(reconcile({ canister: world.canister, method: "icrc1_transfer", stamp: paid.stamp + 1n, preview: paid.preview }), /stamp/);
  await assert.rejects(reconcile({ canister: "aaaaa-aa", method: "icrc1_transfer", stamp: paid.stamp, preview: paid.preview }), /canister/);
});

import { DeliverPolicy, type ConsumerMessages, type JetStreamClient, type JsMsg, type PubAck } from "@nats-io/jetstream";
import type { Msg, NatsConnection, Subscription } from "@nats-io/nats-core";

import { encodeIntent, MAX_INTENT_BYTES, ownHashes, validIntentId, type Intent } from "./intent.js";

/** Stream names: fixed, whatever the subject prefix (docs/protocol.md, "NATS subjects and messages"). */
export const INTENTS_STREAM = "RECONCILE_INTENTS";
export const VERDICTS_STREAM = "RECONCILE_VERDICTS";
export const DEFAULT_PREFIX = "reconcile";

export type Status = "found" | "absent" | "not_yet" | "unreadable" | "invalid";

export interface BlockRef {
  index: string;
  ts: string;
  hash: string;
  kind: string;
  match?: "exact" | "normalized";
}

/** A verdict as published on `<prefix>.verdicts.<intent_id>` (docs/protocol.md, "Verdict"). */
export interface Verdict {
  intent_id: string;
  seq: number;
  status: Status;
  final: boolean;
  /** The hash of the intent body this verdict was decided for (absent only from daemons that predate it). */
  intent_hash?: string;
  block: BlockRef | null;
  near_misses: { index: string; differs: string[] }[] | null;
  window: { from_ts: string; to_ts: string; first_block: string | null; last_block: string | null; narrowed_by?: string } | null;
  evidence: Record<string, unknown> | null;
  reason: { code: string; field?: string; message: string } | null;
  decided_at: string;
}

/** A message on `<prefix>.rejects.<intent_id>`. */
export interface Reject {
  intent_id: string;
  code: string;
  message: string;
  intent_hash?: string;
}

/** Base of this package's errors; `code` is stable. */
export class ReconcileError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ReconcileError";
    this.code = code;
  }
}

/** No final verdict came in time. Nothing is known: never treat it as absent. */
export class ReconcileTimeoutError extends ReconcileError {
  /** The newest own verdict seen (not final), if any. */
  readonly latest: Verdict | undefined;
  constructor(message: string, latest: Verdict | undefined) {
    super("E_TIMEOUT", message);
    this.name = "ReconcileTimeoutError";
    this.latest = latest;
  }
}

/** NATS failed (connection closed, watch ended, publish refused). Nothing is known. */
export class ReconcileTransportError extends ReconcileError {
  readonly latest: Verdict | undefined;
  constructor(message: string, latest: Verdict | undefined, cause?: unknown) {
    super("E_TRANSPORT", message, { cause });
    this.name = "ReconcileTransportError";
    this.latest = latest;
  }
}

/** The daemon refused the intent on the rejects subject. */
export class IntentRejectedError extends ReconcileError {
  readonly intentId: string;
  constructor(code: string, intentId: string, message: string) {
    super(code, message);
    this.name = "IntentRejectedError";
    this.intentId = intentId;
  }
}

/**
 * The intent id is taken by another body: the daemon refused this body
 * (`source: "reject"`), or the id's verdicts were decided for another body
 * (`source: "verdict"`). Those verdicts answer a different question.
 */
export class IntentConflictError extends IntentRejectedError {
  readonly source: "reject" | "verdict";
  constructor(intentId: string, source: "reject" | "verdict", message: string) {
    super("E_INTENT_CONFLICT", intentId, message);
    this.name = "IntentConflictError";
    this.source = source;
  }
}

export interface SubjectOptions {
  /** First token(s) of every subject; default "reconcile" (the daemon's --subject-prefix). */
  prefix?: string;
}

function token(s: string, what: string): string {
  if (typeof s !== "string" || s.length === 0 || s.length > 256 || /[\s.*>]/.test(s)) {
    throw new Error(`${what} ${JSON.stringify(s)} cannot be a subject token`);
  }
  return s;
}

function prefixOf(opts: SubjectOptions | undefined): string {
  const p = opts?.prefix ?? DEFAULT_PREFIX;
  p.split(".").forEach((t) => token(t, "subject prefix token"));
  return p;
}

/** `<prefix>.intents.<canister_id>` */
export function intentSubject(canisterId: string, opts?: SubjectOptions): string {
  return `${prefixOf(opts)}.intents.${token(canisterId, "canister id")}`;
}

/** `<prefix>.verdicts.<intent_id>` */
export function verdictSubject(intentId: string, opts?: SubjectOptions): string {
  return `${prefixOf(opts)}.verdicts.${checkId(intentId)}`;
}

/** `<prefix>.rejects.<intent_id>` */
export function rejectSubject(intentId: string, opts?: SubjectOptions): string {
  return `${prefixOf(opts)}.rejects.${checkId(intentId)}`;
}

function checkId(id: string): string {
  if (!validIntentId(id)) throw new Error(`intent id ${JSON.stringify(id)}: want [A-Za-z0-9_-]{1,128}`);
  return id;
}

/** `Nats-Msg-Id` of an intent: its id and hash, so only identical bodies are deduplicated. */
export function intentMsgId(intent: Intent): string {
  return `${checkId(intent.intent_id)}:${ownHashes(intent).primary}`;
}

export interface PublishResult {
  /** The stream already held this exact body (inside its dedup window). */
  duplicate: boolean;
  msgId: string;
  ack: PubAck;
}

/** Throws IntentRejectedError `E_TOO_LARGE`, as the daemon would, for a body over the fleet's limit. */
function checkSize(intent: Intent, body: Uint8Array): void {
  if (body.length > MAX_INTENT_BYTES) {
    throw new IntentRejectedError("E_TOO_LARGE", intent.intent_id, `intent ${intent.intent_id} is ${body.length} bytes, larger than the limit of ${MAX_INTENT_BYTES} bytes: not published`);
  }
}

/**
 * Publishes an intent to `<prefix>.intents.<canister_id>` with
 * `Nats-Msg-Id: <intent_id>:<intent_hash>`. Re-publishing the same intent is
 * always safe. An intent over MAX_INTENT_BYTES is refused, unpublished.
 */
export async function publishIntent(js: JetStreamClient, intent: Intent, opts?: SubjectOptions & { timeoutMs?: number }): Promise<PublishResult> {
  const body = encodeIntent(intent);
  checkSize(intent, body);
  const msgId = `${checkId(intent.intent_id)}:${ownHashes(intent, body).primary}`;
  const ack = await js.publish(intentSubject(intent.canister_id, opts), body, {
    msgID: msgId,
    expect: { streamName: INTENTS_STREAM },
    ...(opts?.timeoutMs !== undefined ? { timeout: opts.timeoutMs } : {}),
  });
  return { duplicate: ack.duplicate, msgId, ack };
}

function verdictOf(m: JsMsg): Verdict | undefined {
  let v: Verdict;
  try {
    v = m.json<Verdict>();
  } catch {
    return undefined;
  }
  return v && typeof v === "object" && typeof v.status === "string" ? v : undefined;
}

interface Watch {
  messages: ConsumerMessages;
  /** Stops delivery and removes the consumer from the server at once instead of after its inactivity timeout. */
  close(): void;
}

async function openWatch(js: JetStreamClient, intentId: string, opts?: SubjectOptions): Promise<Watch> {
  // An ordered consumer delivering the subject's last message first, then
  // every new one, in order, recreated by the library after any gap.
  const consumer = await js.consumers.get(VERDICTS_STREAM, {
    filter_subjects: [verdictSubject(intentId, opts)],
    deliver_policy: DeliverPolicy.LastPerSubject,
  });
  const messages = await consumer.consume();
  let closed = false;
  return {
    messages,
    close() {
      if (closed) return;
      closed = true;
      void messages.stop();
      consumer.delete().catch(() => undefined); // gone already, or the connection is
    },
  };
}

// One closed() listener per connection, whatever the number of waits: the
// connection's closed() promise is shared, and a handler per wait would stay
// attached until the connection closes.
const closeWatchers = new WeakMap<NatsConnection, Set<(err: void | Error) => void>>();

function onClosed(nc: NatsConnection, fn: (err: void | Error) => void): () => void {
  let set = closeWatchers.get(nc);
  if (!set) {
    const fresh = new Set<(err: void | Error) => void>();
    set = fresh;
    closeWatchers.set(nc, fresh);
    nc.closed().then(
      (err) => fresh.forEach((f) => f(err)),
      (err: Error) => fresh.forEach((f) => f(err)),
    );
  }
  set.add(fn);
  if (nc.isClosed()) queueMicrotask(() => fn(undefined));
  return () => set.delete(fn);
}

/**
 * The intent's verdicts: the latest one first (if any), then every new one.
 * Each carries `intent_hash`; act only on those whose hash is your body's
 * (waitFinal does). Throws ReconcileTransportError if the watch ends by
 * itself; stop it with `break` or the signal.
 */
export async function* watchVerdicts(js: JetStreamClient, intentId: string, opts?: SubjectOptions & { signal?: AbortSignal }): AsyncGenerator<Verdict, void, undefined> {
  const signal = opts?.signal;
  signal?.throwIfAborted();
  const watch = await openWatch(js, intentId, opts);
  const stop = () => watch.close();
  signal?.addEventListener("abort", stop, { once: true });
  try {
    for await (const m of watch.messages) {
      const v = verdictOf(m);
      if (v) yield v;
    }
  } finally {
    signal?.removeEventListener("abort", stop);
    stop();
  }
  signal?.throwIfAborted();
  throw new ReconcileTransportError(`verdict watch of ${intentId} ended`, undefined);
}

export interface WaitOptions extends SubjectOptions {
  signal?: AbortSignal;
  /** Bound of the whole wait; default 30 s. On expiry waitFinal throws. */
  timeoutMs?: number;
  /** Publish the intent once the watch is set up (default true; always safe). */
  publish?: boolean;
  /** The core connection for the rejects subject; default the one js was made from. */
  nc?: NatsConnection;
  /** Called with each own verdict that is not final. */
  onVerdict?: (v: Verdict) => void;
}

function connectionOf(js: JetStreamClient): NatsConnection {
  const getter = (js as { getConnection?: () => NatsConnection }).getConnection;
  if (typeof getter !== "function") throw new TypeError("waitFinal: pass opts.nc: this JetStream client does not expose its connection");
  return getter.call(js);
}

/**
 * Subscribes to the intent's verdicts and rejects, publishes it, and
 * resolves with the first final verdict decided for this very body.
 *
 * Throws ReconcileTimeoutError when none comes within timeoutMs and
 * ReconcileTransportError when NATS fails — neither is ever an `absent`.
 * Throws IntentConflictError when the id belongs to another body, and
 * IntentRejectedError for any other refusal.
 */
export function waitFinal(js: JetStreamClient, intent: Intent, opts: WaitOptions = {}): Promise<Verdict> {
  const id = intent.intent_id;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  let nc: NatsConnection;
  let rejects: string;
  let own: Set<string>;
  try {
    opts.signal?.throwIfAborted();
    checkId(id);
    rejects = rejectSubject(id, opts);
    nc = opts.nc ?? connectionOf(js);
    const body = encodeIntent(intent);
    if (opts.publish !== false) checkSize(intent, body);
    own = ownHashes(intent, body).all;
  } catch (err) {
    return Promise.reject(err);
  }

  let latest: Verdict | undefined;
  let ownSeen = false;
  let settled = false;
  let sub: Subscription | undefined;
  let watch: Watch | undefined;
  let unwatchClose: (() => void) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let resolveP!: (v: Verdict) => void;
  let rejectP!: (e: unknown) => void;
  const done = new Promise<Verdict>((res, rej) => {
    resolveP = res;
    rejectP = rej;
  });

  const onAbort = () => finish(opts.signal!.reason ?? new DOMException("aborted", "AbortError"));
  function finish(err: unknown, v?: Verdict): void {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
    unwatchClose?.();
    sub?.unsubscribe();
    watch?.close();
    if (err === undefined) resolveP(v!);
    else rejectP(err);
  }
  const transport = (what: string) => (cause: unknown) =>
    finish(cause instanceof ReconcileError ? cause : new ReconcileTransportError(`${what} of intent ${id}: ${String((cause as Error)?.message ?? cause)}`, latest, cause));

  function onVerdict(v: Verdict): void {
    if (settled || v.intent_id !== id) return;
    // A verdict without a hash cannot be attributed to a body: never act on it.
    if (typeof v.intent_hash !== "string") return;
    if (!own.has(v.intent_hash)) {
      finish(new IntentConflictError(id, "verdict", `intent ${id}: verdict #${v.seq} (${v.status}) was decided for another body (intent_hash ${v.intent_hash}); this id is taken`));
      return;
    }
    ownSeen = true;
    if (v.final) {
      finish(undefined, v);
      return;
    }
    latest = v;
    opts.onVerdict?.(v);
  }

  function onReject(m: Msg): void {
    let r: Reject;
    try {
      r = m.json<Reject>();
    } catch {
      return;
    }
    // Once a verdict of this body came, the id is bound to it: a conflict
    // reported now is some other body's.
    if (ownSeen || (typeof r.intent_hash === "string" && !own.has(r.intent_hash))) return;
    if (r.code === "E_INTENT_CONFLICT") finish(new IntentConflictError(id, "reject", `intent ${id} refused: ${r.message}`));
    else finish(new IntentRejectedError(r.code, id, `intent ${id} refused (${r.code}): ${r.message}`));
  }

  timer = setTimeout(() => finish(new ReconcileTimeoutError(`no final verdict of intent ${id} within ${timeoutMs} ms${latest ? ` (latest: ${latest.status})` : ""}`, latest)), timeoutMs);
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  unwatchClose = onClosed(nc, (err) => finish(new ReconcileTransportError(`NATS connection closed while waiting for intent ${id}`, latest, err)));

  void (async () => {
    sub = nc.subscribe(rejects, { callback: (err, m) => (err ? transport("rejects subscription")(err) : onReject(m)) });
    await nc.flush();
    if (settled) return;
    const w = await openWatch(js, id, opts);
    watch = w;
    if (settled) {
      w.close();
      return;
    }
    void (async () => {
      for await (const m of w.messages) {
        const v = verdictOf(m);
        if (v) onVerdict(v);
      }
      finish(new ReconcileTransportError(`verdict watch of intent ${id} ended`, latest));
    })().catch(transport("verdict watch"));
    if (opts.publish !== false) await publishIntent(js, intent, opts);
  })().catch(transport("set-up"));

  return done;
}

import { jetstream, type JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";

import { intentFromPreview, type Preview } from "./intent.js";
import { ReconcileError, ReconcileTimeoutError, waitFinal, type SubjectOptions, type Verdict } from "./nats.js";

/** What a tool layer's reconcile hook answers. */
export type ReconcileResult =
  | { status: "found"; block: { index: string; hash: string; ts: string; kind: string } }
  | { status: "absent" }
  | { status: "not_yet" }
  | { status: "unreadable" };

/** The reconcile hook's argument, as a tool layer hands it over. */
export interface ReconcileRequest {
  canister: string | { toText(): string };
  method: string;
  /** Not used: the preview's raw arguments are what was sent. */
  value?: unknown;
  /** created_at_time (ns); checked against the preview's when given. */
  stamp?: bigint | string | number;
  preview: Preview;
}

export interface HookOptions extends SubjectOptions {
  nc: NatsConnection;
  /** The principal the tool layer sends its calls as. */
  caller: unknown;
  /** How long one call waits for a final verdict before answering not_yet/unreadable; default 10 s. */
  waitMs?: number;
  /** What the tool layer saw last, stored with the intent; default "unknown". */
  after?: string;
  /** The tool layer's own intent id for a call; default: derived from the preview. */
  intentId?: (req: ReconcileRequest) => string | undefined;
}

/** The daemon found the intent malformed (`reason.code`); nothing was checked. */
export class InvalidIntentError extends ReconcileError {
  readonly verdict: Verdict;
  constructor(v: Verdict) {
    super(v.reason?.code ?? "E_INVALID", `intent ${v.intent_id} is invalid: ${v.reason?.code ?? ""} ${v.reason?.field ?? ""} ${v.reason?.message ?? ""}`.trim());
    this.name = "InvalidIntentError";
    this.verdict = v;
  }
}

function sameStamp(given: bigint | string | number, sent: string | null | undefined): boolean {
  try {
    return sent != null && BigInt(given) === BigInt(sent);
  } catch {
    return false;
  }
}

/**
 * A tool layer's reconcile hook over the caller's NATS connection: it
 * publishes the preview's intent, waits up to waitMs for a final verdict of
 * that very body, and answers with it — or, when none came in time, with the
 * latest non-final status (`unreadable` when the daemon has said nothing).
 * It throws, never answers, when the id belongs to another body, the daemon
 * refused or found the intent invalid, or NATS failed.
 */
export function createReconcileHook(opts: HookOptions): (req: ReconcileRequest) => Promise<ReconcileResult> {
  const js: JetStreamClient = jetstream(opts.nc);
  const waitMs = opts.waitMs ?? 10_000;
  return async function reconcile(req: ReconcileRequest): Promise<ReconcileResult> {
    const intent = intentFromPreview(req.preview, { caller: opts.caller, after: opts.after, intentId: opts.intentId?.(req) });
    const canister = typeof req.canister === "object" && req.canister !== null ? req.canister.toText() : req.canister;
    if (canister !== undefined && canister !== intent.canister_id) {
      throw new Error(`reconcile: canister ${canister} is not the preview's ${intent.canister_id}`);
    }
    if (req.method !== undefined && req.method !== intent.method) {
      throw new Error(`reconcile: method ${req.method} is not the preview's ${intent.method}`);
    }
    if (req.stamp !== undefined && !sameStamp(req.stamp, intent.args.created_at_time)) {
      throw new Error(`reconcile: stamp ${String(req.stamp)} is not the preview's created_at_time ${intent.args.created_at_time}`);
    }
    let v: Verdict;
    try {
      v = await waitFinal(js, intent, { nc: opts.nc, timeoutMs: waitMs, prefix: opts.prefix });
    } catch (err) {
      if (err instanceof ReconcileTimeoutError) {
        return { status: err.latest?.status === "not_yet" ? "not_yet" : "unreadable" };
      }
      throw err;
    }
    switch (v.status) {
      case "found": {
        const b = v.block;
        if (!b) throw new ReconcileError("E_BAD_VERDICT", `intent ${v.intent_id}: found verdict without a block`);
        return { status: "found", block: { index: b.index, hash: b.hash, ts: b.ts, kind: b.kind } };
      }
      case "absent":
        return { status: "absent" };
      case "invalid":
        throw new InvalidIntentError(v);
      default:
        throw new ReconcileError("E_BAD_VERDICT", `intent ${v.intent_id}: final verdict with status ${v.status}`);
    }
  };
}

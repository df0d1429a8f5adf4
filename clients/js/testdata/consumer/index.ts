// A tool layer's first use of the packed client: it type-checks against the
// NATS packages this project installed itself, and it runs.
import { jetstream } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { createReconcileHook, intentFromPreview, intentHash, intentMsgId, waitFinal, type Intent, type Verdict } from "@reconciled/client";

// Passing this project's jetstream(nc) to the client: one copy of the types.
export async function settle(nc: NatsConnection, intent: Intent): Promise<Verdict> {
  return waitFinal(jetstream(nc), intent, { timeoutMs: 1_000 });
}

export async function hook(servers: string) {
  const nc = await connect({ servers });
  return createReconcileHook({ nc, caller: "2vxsx-fae", waitMs: 1_000 });
}

const intent = intentFromPreview(
  {
    preview_id: "p1",
    method: "icrc1_transfer",
    canister: "mxzaz-hqaaa-aaaar-qaada-cai",
    args: {
      to: { text: "Alice", raw: { owner: "2vxsx-fae", subaccount: null } },
      amount: { text: "1.5 ckBTC", raw: "150000000" },
      memo: { text: "lunch", raw: "6c756e6368" },
      created_at_time: { text: "…", raw: "1791547201000000000" },
    },
  },
  { caller: "2vxsx-fae" },
);
console.log(JSON.stringify({ intent, intent_hash: intentHash(intent), msg_id: intentMsgId(intent) }));

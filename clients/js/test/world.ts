// The processes the end-to-end tests run against, all on loopback: the test
// replica (`reconciled-dev testledger`), the daemon (`reconciled serve` with its
// embedded NATS server) and the payer, which makes real transfers with
// agent-go and reports the exact Candid bytes it sent.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface World {
  icURL: string;
  natsURL: string;
  canister: string;
  payer: string;
  /** The ledger clock (ns). */
  now(): Promise<bigint>;
  advance(ns: bigint): Promise<void>;
  pay(args: PayArgs): Promise<{ caller: string; block: string; arg_hex: string }>;
  close(): Promise<void>;
}

export interface PayArgs {
  to: string;
  amount: string;
  createdAtTime: bigint;
  memo?: string;
}

const PAYER_SEED = "7";

async function binaries(dir: string): Promise<{ daemon: string; dev: string; payer: string }> {
  const daemon = process.env.CLIENT_TEST_DAEMON_BIN;
  const dev = process.env.CLIENT_TEST_DEV_BIN;
  const payer = process.env.CLIENT_TEST_PAYER_BIN;
  if (daemon && dev && payer) return { daemon, dev, payer };
  // Run outside `go test`: build them from this repository. The test ledger
  // is reconciled-dev's: the daemon's binary does not carry it.
  const repo = fileURLToPath(new URL("../../../../", import.meta.url));
  const out = { daemon: join(dir, "reconciled"), dev: join(dir, "reconciled-dev"), payer: join(dir, "payer") };
  await run("go", ["build", "-o", out.daemon, "./cmd/reconciled"], { cwd: repo });
  await run("go", ["build", "-o", out.dev, "./cmd/reconciled-dev"], { cwd: repo });
  await run("go", ["build", "-o", out.payer, "./clients/js/testdata/payer"], { cwd: repo });
  return out;
}

// A child's environment without RECONCILED_* variables: only flags configure it.
function childEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RECONCILED_")));
}

/** Resolves with the first line of stream that pick accepts; rejects if the process exits first. */
function firstLine<T>(p: ChildProcess, stream: NodeJS.ReadableStream, what: string, pick: (line: string) => T | undefined, log: string[]): Promise<T> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: stream });
    let done = false;
    rl.on("line", (line) => {
      log.push(line);
      if (log.length > 200) log.shift();
      if (done) return;
      const v = pick(line);
      if (v !== undefined) {
        done = true;
        resolve(v);
      }
    });
    p.once("exit", (code) => {
      if (!done) reject(new Error(`${what} exited (${code}) before it was ready:\n${log.join("\n")}`));
    });
  });
}

function stop(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => p.kill("SIGKILL"), 10_000);
    p.once("exit", () => {
      clearTimeout(kill);
      resolve();
    });
    p.kill("SIGTERM");
  });
}

export async function startWorld(): Promise<World> {
  const dir = mkdtempSync(join(tmpdir(), "reconciled-js-"));
  const bin = await binaries(dir);
  const { stdout } = await run(bin.payer, ["principal", "-seed", PAYER_SEED]);
  const payer = (JSON.parse(stdout) as { principal: string }).principal;

  const ledgerLog: string[] = [];
  const ledger = spawn(bin.dev, ["testledger", "--listen", "127.0.0.1:0", "--admin", "--seed", "18", "--initial-balance", `${payer}=1000000000000000`], {
    env: childEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  createInterface({ input: ledger.stderr! }).on("line", (l) => ledgerLog.push(l));
  const ready = await firstLine(ledger, ledger.stdout!, "testledger", (l) => JSON.parse(l) as { url: string; ledgers: { canister_id: string }[] }, ledgerLog);

  const daemonLog: string[] = [];
  const daemon = spawn(
    bin.daemon,
    ["serve", "--ic-url", ready.url, "--fetch-root-key", "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
      "--data", join(dir, "data"), "--instance", "js-client-test", "--poll-interval", "200ms", "--grace", "2s"],
    { env: childEnv(), stdio: ["ignore", "ignore", "pipe"] },
  );
  const natsURL = await firstLine(daemon, daemon.stderr!, "reconciled serve", (l) => {
    try {
      const e = JSON.parse(l) as { msg?: string; nats_listen?: string };
      return e.msg === "reconciled serving" ? e.nats_listen : undefined;
    } catch {
      return undefined;
    }
  }, daemonLog).catch(async (err) => {
    await stop(ledger);
    throw err;
  });
  if (!natsURL) throw new Error("reconciled serve did not report its NATS address");

  const admin = async (method: string, body?: unknown): Promise<bigint> => {
    const res = await fetch(`${ready.url}/admin/time`, { method, body: body === undefined ? undefined : JSON.stringify(body) });
    if (!res.ok) throw new Error(`admin time ${method}: ${res.status} ${await res.text()}`);
    return BigInt(((await res.json()) as { now_ns: string }).now_ns);
  };

  return {
    icURL: ready.url,
    natsURL,
    canister: ready.ledgers[0]!.canister_id,
    payer,
    now: () => admin("GET"),
    advance: async (ns) => void (await admin("POST", { advance_ns: ns.toString() })),
    pay: async (a) => {
      const args = ["transfer", "-seed", PAYER_SEED, "-url", ready.url, "-canister", ready.ledgers[0]!.canister_id,
        "-to", a.to, "-amount", a.amount, "-created-at-time", a.createdAtTime.toString()];
      if (a.memo !== undefined) args.push("-memo", a.memo);
      const { stdout } = await run(bin.payer, args);
      return JSON.parse(stdout) as { caller: string; block: string; arg_hex: string };
    },
    close: async () => {
      await stop(daemon);
      await stop(ledger);
      rmSync(dir, { recursive: true, force: true });
      if (process.exitCode) {
        console.error(`daemon log (last lines):\n${daemonLog.slice(-40).join("\n")}`);
      }
    },
  };
}

// @dfinity/agent 3.x against the test replica, with query signature
// verification on (the default). Run by conformance_test.go, which starts
// the replica and passes REPLICA_URL and LEDGER_ID.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  Actor,
  CanisterStatus,
  Certificate,
  Cbor,
  HttpAgent,
  LookupPathStatus,
  lookup_path,
  reconstruct,
} from '@dfinity/agent';
import {
  DelegationChain,
  DelegationIdentity,
  ECDSAKeyIdentity,
  Ed25519KeyIdentity,
} from '@dfinity/identity';
import { Secp256k1KeyIdentity } from '@dfinity/identity-secp256k1';
import { Principal } from '@dfinity/principal';

const url = process.env.REPLICA_URL;
const ledgerId = Principal.fromText(process.env.LEDGER_ID);
assert.ok(url && url.startsWith('http://127.0.0.1:'), 'REPLICA_URL must be a loopback URL');

const idlFactory = ({ IDL }) => {
  const Value = IDL.Rec();
  Value.fill(
    IDL.Variant({
      Blob: IDL.Vec(IDL.Nat8),
      Text: IDL.Text,
      Nat: IDL.Nat,
      Int: IDL.Int,
      Array: IDL.Vec(Value),
      Map: IDL.Vec(IDL.Tuple(IDL.Text, Value)),
    }),
  );
  const Account = IDL.Record({ owner: IDL.Principal, subaccount: IDL.Opt(IDL.Vec(IDL.Nat8)) });
  const common = {
    BadFee: IDL.Record({ expected_fee: IDL.Nat }),
    InsufficientFunds: IDL.Record({ balance: IDL.Nat }),
    TooOld: IDL.Null,
    CreatedInFuture: IDL.Record({ ledger_time: IDL.Nat64 }),
    Duplicate: IDL.Record({ duplicate_of: IDL.Nat }),
    TemporarilyUnavailable: IDL.Null,
    GenericError: IDL.Record({ error_code: IDL.Nat, message: IDL.Text }),
  };
  const TransferError = IDL.Variant({ ...common, BadBurn: IDL.Record({ min_burn_amount: IDL.Nat }) });
  const ApproveError = IDL.Variant({
    ...common,
    AllowanceChanged: IDL.Record({ current_allowance: IDL.Nat }),
    Expired: IDL.Record({ ledger_time: IDL.Nat64 }),
  });
  const TransferFromError = IDL.Variant({
    ...common,
    BadBurn: IDL.Record({ min_burn_amount: IDL.Nat }),
    InsufficientAllowance: IDL.Record({ allowance: IDL.Nat }),
  });
  const result = (err) => IDL.Variant({ Ok: IDL.Nat, Err: err });
  const opt = IDL.Opt;
  const GetBlocksArgs = IDL.Vec(IDL.Record({ start: IDL.Nat, length: IDL.Nat }));
  const GetBlocksResult = IDL.Rec();
  GetBlocksResult.fill(
    IDL.Record({
      log_length: IDL.Nat,
      blocks: IDL.Vec(IDL.Record({ id: IDL.Nat, block: Value })),
      archived_blocks: IDL.Vec(
        IDL.Record({ args: GetBlocksArgs, callback: IDL.Func([GetBlocksArgs], [GetBlocksResult], ['query']) }),
      ),
    }),
  );
  return IDL.Service({
    icrc1_symbol: IDL.Func([], [IDL.Text], ['query']),
    icrc1_fee: IDL.Func([], [IDL.Nat], ['query']),
    icrc1_balance_of: IDL.Func([Account], [IDL.Nat], ['query']),
    icrc1_transfer: IDL.Func(
      [
        IDL.Record({
          from_subaccount: opt(IDL.Vec(IDL.Nat8)),
          to: Account,
          amount: IDL.Nat,
          fee: opt(IDL.Nat),
          memo: opt(IDL.Vec(IDL.Nat8)),
          created_at_time: opt(IDL.Nat64),
        }),
      ],
      [result(TransferError)],
      [],
    ),
    icrc2_approve: IDL.Func(
      [
        IDL.Record({
          from_subaccount: opt(IDL.Vec(IDL.Nat8)),
          spender: Account,
          amount: IDL.Nat,
          expected_allowance: opt(IDL.Nat),
          expires_at: opt(IDL.Nat64),
          fee: opt(IDL.Nat),
          memo: opt(IDL.Vec(IDL.Nat8)),
          created_at_time: opt(IDL.Nat64),
        }),
      ],
      [result(ApproveError)],
      [],
    ),
    icrc2_transfer_from: IDL.Func(
      [
        IDL.Record({
          spender_subaccount: opt(IDL.Vec(IDL.Nat8)),
          from: Account,
          to: Account,
          amount: IDL.Nat,
          fee: opt(IDL.Nat),
          memo: opt(IDL.Vec(IDL.Nat8)),
          created_at_time: opt(IDL.Nat64),
        }),
      ],
      [result(TransferFromError)],
      [],
    ),
    icrc3_get_blocks: IDL.Func([GetBlocksArgs], [GetBlocksResult], ['query']),
    icrc3_get_tip_certificate: IDL.Func(
      [],
      [opt(IDL.Record({ certificate: IDL.Vec(IDL.Nat8), hash_tree: IDL.Vec(IDL.Nat8) }))],
      ['query'],
    ),
  });
};

// Every request the peers send, by path, to show that queries were verified
// (subnet keys fetched through read_state) and which endpoints were used.
const seen = [];
const countingFetch = (input, init) => {
  seen.push(new URL(String(input)).pathname);
  return fetch(input, init);
};

async function makeAgent(identity) {
  const agent = HttpAgent.createSync({ host: url, identity, fetch: countingFetch, verifyQuerySignatures: true });
  await agent.fetchRootKey();
  return agent;
}

function seed(n) {
  return new Uint8Array(32).fill(n);
}

async function admin(path, body) {
  const r = await fetch(url + path, { method: 'POST', body: JSON.stringify(body) });
  const text = await r.text();
  assert.equal(r.status, 200, `${path}: ${text}`);
  return JSON.parse(text);
}

const mint = (owner, amount) => admin(`/admin/ledgers/${ledgerId.toText()}/mint`, { to: owner.toText(), amount: String(amount) });
const ledgerNow = async () => BigInt((await (await fetch(url + '/admin/time')).json()).now_ns);
const advance = (ns) => admin('/admin/time', { advance_ns: String(ns) });

const account = (p) => ({ owner: p, subaccount: [] });
const transferArg = (to, amount, created, memo) => ({
  from_subaccount: [],
  to: account(to),
  amount,
  fee: [],
  memo: memo ? [memo] : [],
  created_at_time: created === undefined ? [] : [created],
});

// ICRC-3 representation-independent hash of a Value.
function leb(n) {
  const out = [];
  do {
    let b = Number(n & 0x7fn);
    n >>= 7n;
    if (n > 0n) b |= 0x80;
    out.push(b);
  } while (n > 0n);
  return Uint8Array.from(out);
}
function sleb(n) {
  const out = [];
  for (;;) {
    const b = Number(n & 0x7fn);
    n >>= 7n;
    if ((n === 0n && (b & 0x40) === 0) || (n === -1n && (b & 0x40) !== 0)) {
      out.push(b);
      return Uint8Array.from(out);
    }
    out.push(b | 0x80);
  }
}
const sha = (...parts) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};
function hashValue(v) {
  if ('Nat' in v) return sha(leb(v.Nat));
  if ('Int' in v) return sha(sleb(v.Int));
  if ('Text' in v) return sha(new TextEncoder().encode(v.Text));
  if ('Blob' in v) return sha(Uint8Array.from(v.Blob));
  if ('Array' in v) return sha(...v.Array.map(hashValue));
  const pairs = v.Map.map(([k, x]) => Buffer.concat([sha(new TextEncoder().encode(k)), hashValue(x)]));
  pairs.sort(Buffer.compare);
  return sha(...pairs);
}

const alice = Ed25519KeyIdentity.generate(seed(1));
const bob = Secp256k1KeyIdentity.generate(seed(2));
// An Internet-Identity-style sender: the root key delegates to a session key
// for the ledger only; the caller is the root key's principal.
const carolRoot = Ed25519KeyIdentity.generate(seed(3));
const carolSession = await ECDSAKeyIdentity.generate();
const carolChain = await DelegationChain.create(carolRoot, carolSession.getPublicKey(), new Date(Date.now() + 3600_000), {
  targets: [ledgerId],
});
const carol = DelegationIdentity.fromDelegation(carolSession, carolChain);

const agents = {};
const actors = {};
for (const [name, id] of Object.entries({ alice, bob, carol })) {
  agents[name] = await makeAgent(id);
  actors[name] = Actor.createActor(idlFactory, { agent: agents[name], canisterId: ledgerId });
}
const P = {
  alice: alice.getPrincipal(),
  bob: bob.getPrincipal(),
  carol: carol.getPrincipal(),
};

let createdAt; // the stamp of the transfer that is later too old
let firstIndex;

test('senders: ed25519, secp256k1 and a delegation chain are the principals the ledger sees', async () => {
  assert.ok(P.carol.toText() === carolRoot.getPrincipal().toText());
  await mint(P.alice, 10_000_000n);
  await mint(P.carol, 1_000_000n);
  assert.equal(await actors.bob.icrc1_balance_of(account(P.alice)), 10_000_000n);
});

test('verified queries (v2 query, node signatures checked against the subnet keys)', async () => {
  assert.equal(await actors.alice.icrc1_symbol(), 'TST');
  assert.equal(await actors.carol.icrc1_balance_of(account(P.carol)), 1_000_000n);
  assert.ok(seen.some((p) => p.endsWith('/query')), 'no query sent');
  assert.ok(seen.some((p) => p.endsWith('/read_state')), 'no read_state for the subnet keys: queries were not verified');
});

test('update (v3 synchronous call, certificate verified) and Duplicate with the original index', async () => {
  createdAt = await ledgerNow();
  const memo = new TextEncoder().encode('conformance');
  const arg = transferArg(P.bob, 150_000n, createdAt, memo);
  const r = await actors.alice.icrc1_transfer(arg);
  assert.ok('Ok' in r, JSON.stringify(r, (_, v) => (typeof v === 'bigint' ? v.toString() : v)));
  firstIndex = r.Ok;
  const again = await actors.alice.icrc1_transfer(arg);
  assert.deepEqual(again, { Err: { Duplicate: { duplicate_of: firstIndex } } });
  assert.ok(seen.some((p) => /\/api\/v3\/canister\/[^/]+\/call$/.test(p)), 'no v3 call');
  const c = await actors.carol.icrc1_transfer(transferArg(P.bob, 1_000n));
  assert.ok('Ok' in c, 'delegated transfer');
});

test('approve by one identity, transfer_from by a second', async () => {
  const a = await actors.alice.icrc2_approve({
    from_subaccount: [],
    spender: account(P.bob),
    amount: 500_000n,
    expected_allowance: [],
    expires_at: [],
    fee: [],
    memo: [],
    created_at_time: [],
  });
  assert.ok('Ok' in a);
  const before = await actors.bob.icrc1_balance_of(account(P.carol));
  const tf = await actors.bob.icrc2_transfer_from({
    spender_subaccount: [],
    from: account(P.alice),
    to: account(P.carol),
    amount: 200_000n,
    fee: [],
    memo: [],
    created_at_time: [],
  });
  assert.ok('Ok' in tf, JSON.stringify(tf, (_, v) => (typeof v === 'bigint' ? v.toString() : v)));
  assert.equal(await actors.bob.icrc1_balance_of(account(P.carol)), before + 200_000n);
});

test('archived blocks through the callback', async () => {
  const res = await actors.alice.icrc3_get_blocks([{ start: 0n, length: 5n }]);
  assert.ok(res.archived_blocks.length > 0, 'block 0 is not archived');
  const { args, callback } = res.archived_blocks[0];
  const [archiveId, method] = callback;
  assert.equal(method, 'icrc3_get_blocks');
  const archive = Actor.createActor(idlFactory, { agent: agents.alice, canisterId: archiveId });
  const got = await archive[method](args);
  assert.deepEqual(
    got.blocks.map((b) => b.id),
    [0n, 1n, 2n, 3n, 4n],
  );
  const md = await CanisterStatus.request({
    canisterId: archiveId,
    agent: agents.alice,
    paths: [{ kind: 'metadata', key: 'did', path: 'candid:service', decodeStrategy: 'utf-8' }],
  });
  assert.match(md.get('did'), /icrc3_get_blocks : \(GetBlocksArgs\) -> \(GetBlocksResult\) query;/);
});

test('the tip certificate, verified by the peer, certifies the last block', async () => {
  const [tip] = await actors.alice.icrc3_get_tip_certificate();
  assert.ok(tip, 'no tip certificate');
  const cert = await Certificate.create({
    certificate: Uint8Array.from(tip.certificate),
    rootKey: agents.alice.rootKey,
    canisterId: ledgerId,
    agent: agents.alice,
  });
  const certified = cert.lookup_path(['canister', ledgerId.toUint8Array(), 'certified_data']);
  assert.equal(certified.status, LookupPathStatus.Found);
  const tree = Cbor.decode(Uint8Array.from(tip.hash_tree));
  assert.deepEqual(Buffer.from(await reconstruct(tree)), Buffer.from(certified.value));
  const idx = lookup_path(['last_block_index'], tree);
  const hash = lookup_path(['last_block_hash'], tree);
  assert.equal(idx.status, LookupPathStatus.Found);
  let last = 0n;
  for (let i = idx.value.length - 1; i >= 0; i--) last = (last << 7n) | BigInt(idx.value[i] & 0x7f);
  const { log_length, blocks } = await actors.alice.icrc3_get_blocks([{ start: last, length: 1n }]);
  assert.equal(log_length, last + 1n);
  assert.deepEqual(Buffer.from(hashValue(blocks[0].block)), Buffer.from(hash.value));
});

test('TooOld after an advance past the window, and the same agents keep working', async () => {
  await advance(25n * 3600n * 1_000_000_000n + 120n * 1_000_000_000n);
  // The first call after the jump: the agent's expiry is from its own clock
  // (accepted against the wall clock), the certificate is a day ahead, so
  // agent-js syncs its clock to /time and verifies again.
  const old = await actors.alice.icrc1_transfer(transferArg(P.bob, 150_000n, createdAt, new TextEncoder().encode('conformance')));
  assert.deepEqual(old, { Err: { TooOld: null } });
  // Expiries now come from the synced clock, query signatures carry the
  // ledger clock, and every identity still works.
  assert.ok('Ok' in (await actors.alice.icrc1_transfer(transferArg(P.bob, 10n))));
  assert.ok('Ok' in (await actors.bob.icrc2_transfer_from({
    spender_subaccount: [],
    from: account(P.alice),
    to: account(P.bob),
    amount: 1_000n,
    fee: [],
    memo: [],
    created_at_time: [await ledgerNow()],
  })));
  assert.ok('Ok' in (await actors.carol.icrc1_transfer(transferArg(P.alice, 10n))));
  assert.ok((await actors.carol.icrc1_balance_of(account(P.bob))) > 0n);
  const [tip] = await actors.alice.icrc3_get_tip_certificate();
  await Certificate.create({ certificate: Uint8Array.from(tip.certificate), rootKey: agents.alice.rootKey, canisterId: ledgerId, agent: agents.alice });
});

test('a second advance: agent-js syncs only once by itself; syncTime() re-syncs the same agent', async () => {
  await advance(25n * 3600n * 1_000_000_000n);
  for (const name of ['alice', 'bob', 'carol']) {
    await agents[name].syncTime(ledgerId);
    assert.ok('Ok' in (await actors[name].icrc1_transfer(transferArg(P.alice, 1n))), name);
    assert.ok((await actors[name].icrc1_balance_of(account(P.alice))) > 0n);
  }
});

// node-redlock (npm redlock@4 on ioredis) on scripts/bench's workloads W1-W3.
//
// Same workloads and JSON output as dlock's drivers (bench/pair_bench.cpp, bench/load.cpp), so
// bench/run.py treats every system alike. scripts/bench installs the packages with
// `npm install --prefix build/bench-node redlock@4 ioredis@5` and runs this with
// NODE_PATH=build/bench-node/node_modules.
//
//   node redlock_peer.js w1 --port P [--iterations 20000] [--warmup 500] [--samples FILE]
//                           [--names A,B,...]
//   node redlock_peer.js w2 --port P --lockers 50 --seconds S [--start-at NS] [--prefix P]
//   node redlock_peer.js w3 --port P --name N --hold-us 1000 --think-us 1000 --seconds S
//                           [--start-at NS] [--id K] [--poll-ms 1] [--jitter-ms 0]
//   (every workload: --port P, --ports P1,P2,... or --cluster H:P,...)
//
// --cluster H:P,H:P,... runs on a Redis Cluster: Redlock over one ioredis Cluster client (those
// nodes as seeds), as redlock's README describes for a single cluster. --names: W1's pairs cycle
// over these names (each suffixed with the pid), one pair per name in turn; on a cluster the
// bench gives one hash tag per master.
//
// --ports P1,P2,...: Redlock in quorum mode over independent servers, one ioredis client each
// (`new Redlock([c1, c2, ...])`; bench/redlock.py, against dlock::red_lock): a lock needs
// ⌊N/2⌋+1 of them, and every attempt goes to all at once, as redlock does.
//
// Otherwise one Redis server (Redlock with one client: no quorum round trips to other servers).
// Locks have a 30 s TTL. A waiting lock() retries every --poll-ms ms without limit, ± a random
// --jitter-ms (default 0; redlock's defaults are 10 retries, 200 ms apart ± 100 ms; W3 passes
// 1 ms, the hold time: the peer's best case for latency). Timestamps are
// process.hrtime.bigint(): CLOCK_MONOTONIC on Linux, the clock every process on the host shares.
'use strict';
const fs = require('fs');
const Redis = require('ioredis');
const Redlock = require('redlock');

function parse(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error('unexpected argument ' + a);
    const eq = a.indexOf('=');
    if (eq >= 0) out[a.slice(2, eq)] = a.slice(eq + 1);
    else out[a.slice(2)] = argv[++i];
  }
  return out;
}

const now = () => process.hrtime.bigint();
const sleepMs = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// Returns when now() reads endNs: blocks the thread until HOLD_SPIN_NS before it (Atomics.wait
// takes a fractional timeout in ms; setTimeout rounds up to whole ms), then reads the clock — as
// bench/common.hpp's hold_until_ns: W3's hold lasts what the workload says. Nothing is outstanding
// on the connection while the lock is held, so blocking the event loop delays nothing.
const HOLD_SPIN_NS = 150000n;
const holdCell = new Int32Array(new SharedArrayBuffer(4));
function holdUntil(endNs) {
  const left = endNs - now();
  if (left > HOLD_SPIN_NS) Atomics.wait(holdCell, 0, 0, Number(left - HOLD_SPIN_NS) / 1e6);
  while (now() < endNs) {
    // the last HOLD_SPIN_NS
  }
}
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

async function startLine(atNs) {
  if (atNs > 0n) {
    const ms = Number(atNs - now()) / 1e6;
    if (ms > 0) await sleepMs(ms);
    return now() > atNs ? now() : atNs;
  }
  return now();
}

function percentile(sorted, q) {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1];
}

async function w1(a, clients) {
  const redlock = new Redlock(clients, { retryCount: 0 });
  const names = (a.names ? a.names.split(',') : ['bench:w1:redlock']).map((b) => b + ':' + process.pid);
  for (let i = 0; i < a.warmup; i++) await (await redlock.lock(names[i % names.length], 30000)).unlock();
  const us = [];
  for (let i = 0; i < a.iterations; i++) {
    const name = names[i % names.length];
    const t0 = now();
    const lock = await redlock.lock(name, 30000);
    await lock.unlock();
    us.push(Number(now() - t0) / 1e3);
  }
  if (a.samples) fs.writeFileSync(a.samples, us.map((v) => v.toFixed(2) + '\n').join(''));
  const s = [...us].sort((x, y) => x - y);
  emit({ system: 'node-redlock', n: us.length, p50_us: percentile(s, 0.5), p99_us: percentile(s, 0.99),
         mean_us: us.reduce((x, y) => x + y, 0) / us.length, min_us: s[0], max_us: s[s.length - 1] });
}

async function w2(a, clients) {
  const redlock = new Redlock(clients, { retryCount: 0 });
  const prefix = a.prefix || 'bench:w2:redlock:' + process.pid;
  const t0 = await startLine(a.startAt);
  const deadline = t0 + BigInt(Math.round(a.seconds * 1e9));
  const cpu0 = process.cpuUsage();
  let pairs = 0, errors = 0;
  const locker = async (i) => {
    const name = prefix + ':' + i;
    while (now() < deadline) {
      try {
        const lock = await redlock.lock(name, 30000);
        await lock.unlock();
        pairs++;
      } catch (e) {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: a.lockers }, (_, i) => locker(i)));
  const secs = Number(now() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  emit({ system: 'node-redlock', lockers: a.lockers, pairs, seconds: secs, pairs_per_s: pairs / secs, errors,
         cpu_s: (cpu.user + cpu.system) / 1e6 });
}

async function w3(a, clients) {
  const redlock = new Redlock(clients, { retryCount: -1, retryDelay: a.pollMs, retryJitter: a.jitterMs });
  const t0 = await startLine(a.startAt);
  const deadline = t0 + BigInt(Math.round(a.seconds * 1e9));
  const events = [];
  let errors = 0;
  for (;;) {
    const call = now();
    if (call >= deadline) break;
    let lock;
    try {
      lock = await redlock.lock(a.name, 30000);
    } catch (e) {
      errors++;
      continue;
    }
    const acquired = now();
    holdUntil(acquired + BigInt(a.holdUs) * 1000n);
    const unlockCall = now();
    try {
      await lock.unlock();
    } catch (e) {
      errors++;
    }
    const unlocked = now();
    events.push([call, acquired, unlockCall, unlocked].map(String));
    await sleepMs(a.thinkUs / 1000);
  }
  // Timestamps go out as JSON numbers (ns; exact as integers in the JSON text).
  const body = events.map((e) => '[' + e.join(',') + ']').join(',');
  process.stdout.write('{"system": "node-redlock", "id": ' + a.id + ', "start": ' + t0 + ', "deadline": ' +
                       deadline + ', "errors": ' + errors + ', "events": [' + body + ']}\n');
}

async function main() {
  const cmd = process.argv[2];
  const o = parse(process.argv.slice(3));
  const a = {
    host: o.host || '127.0.0.1', port: Number(o.port),
    iterations: Number(o.iterations || 20000), warmup: Number(o.warmup || 500),
    samples: o.samples || '', lockers: Number(o.lockers || 50), seconds: Number(o.seconds || 3),
    startAt: BigInt(o['start-at'] || 0), prefix: o.prefix || '', name: o.name || 'bench:w3:redlock',
    holdUs: Number(o['hold-us'] || 1000), thinkUs: Number(o['think-us'] || 1000), id: Number(o.id || 0),
    pollMs: Number(o['poll-ms'] || 1), jitterMs: Number(o['jitter-ms'] || 0), names: o.names || '',
    cluster: o.cluster || '', ports: o.ports ? o.ports.split(',').map(Number) : [Number(o.port)],
  };
  const clients = a.cluster
    ? [new Redis.Cluster(a.cluster.split(',').map((s) => {
      const at = s.lastIndexOf(':');
      return { host: s.slice(0, at), port: Number(s.slice(at + 1)) };
    }), { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 1 } })]
    : a.ports.map((port) => new Redis({ host: a.host, port, lazyConnect: true, maxRetriesPerRequest: 1 }));
  await Promise.all(clients.map((c) => c.connect()));
  try {
    if (cmd === 'w1') await w1(a, clients);
    else if (cmd === 'w2') await w2(a, clients);
    else if (cmd === 'w3') await w3(a, clients);
    else throw new Error('unknown workload ' + cmd);
  } finally {
    clients.forEach((c) => c.disconnect());
  }
}

main().catch((e) => {
  process.stderr.write('redlock_peer: ' + (e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});

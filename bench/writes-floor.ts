// The writes floor: the least a client can do to make a sweep's writes. Run with plain node:
//   node bench/writes-floor.ts PLAN.json
// PLAN (written by bench/scale.bench.ts): the server, its CA, a bearer token, the concurrency,
// and one chain of requests per Job (sent in order, the chains `concurrency` at a time). Bodies
// are ready-made strings, answers are drained unread, one keep-alive agent: nothing else.
// Prints one JSON line: requests, failures (non-2xx), writeMs (the requests alone).
import * as fs from 'node:fs';
import * as https from 'node:https';

interface Plan {
  server: string;
  ca: string;
  token: string;
  concurrency: number;
  chains: { method: string; path: string; contentType: string; body: string }[][];
}

const plan = JSON.parse(fs.readFileSync(process.argv[2]!, 'utf8')) as Plan;
const agent = new https.Agent({ keepAlive: true, maxSockets: 32, ca: plan.ca });
let requests = 0;
let failures = 0;

function send(r: Plan['chains'][number][number]): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = https.request(new URL(plan.server + r.path), {
      method: r.method,
      agent,
      headers: {
        Authorization: `Bearer ${plan.token}`,
        Accept: 'application/json',
        'Content-Type': r.contentType,
        'Content-Length': Buffer.byteLength(r.body),
      },
    });
    req.on('response', (res) => {
      requests += 1;
      if ((res.statusCode ?? 0) >= 300) failures += 1;
      res.on('end', resolve);
      res.resume();
    });
    req.on('error', reject);
    req.end(r.body);
  });
}

const started = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: plan.concurrency }, async () => {
    while (next < plan.chains.length) {
      for (const r of plan.chains[next++]!) await send(r);
    }
  }),
);
console.log(JSON.stringify({ requests, failures, writeMs: Math.round(performance.now() - started) }));
agent.destroy();

// Drive the OFFICIAL RocketMQ 5 Node.js client (rocketmq-client-nodejs 1.0.8, unmodified, from the
// committed package-lock.json) as a producer. usage (NODE_PATH = the installed node_modules):
//   node node_producer.js ACCESS_POINT TOPIC COUNT
// One JSON line per send on stdout -- {"seq", "ok", "msgId", "t", "error"?} -- and a last line
// {"done": true, "ok": N, "failed": M}. Message i: body "seq-<i>", tag "TagN", keys "k<i>",
// property seq=<i>. With MQHA_TEST_TLS=1 the client's sslEnabled option is on (it trusts
// GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, grpc-js's own variable).
'use strict';
const { Producer } = require('rocketmq-client-nodejs');

const [accessPoint, topic, countText] = process.argv.slice(2);
const count = Number(countText);

// $MQ_ACCESS_KEY and $MQ_SECRET_KEY sign every call (unset: none).
const sessionCredentials = process.env.MQ_ACCESS_KEY
  ? { accessKey: process.env.MQ_ACCESS_KEY, accessSecret: process.env.MQ_SECRET_KEY || '' }
  : undefined;

function withTimeout(promise, ms, what) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

async function main() {
  const sslEnabled = process.env.MQHA_TEST_TLS === '1';
  const options = { endpoints: accessPoint, topics: [topic], requestTimeout: 3000, sessionCredentials, sslEnabled };
  const producer = new Producer(options);
  // Node waits for the server's Settings without a timeout of its own.
  await withTimeout(producer.startup(), 30000, 'producer.startup');
  let ok = 0;
  let failed = 0;
  for (let seq = 0; seq < count; seq++) {
    const message = {
      topic,
      tag: 'TagN',
      keys: [`k${seq}`],
      properties: new Map([['seq', String(seq)]]),
      body: Buffer.from(`seq-${seq}`),
    };
    try {
      const receipt = await producer.send(message);
      ok++;
      console.log(JSON.stringify({ seq, ok: true, msgId: receipt.messageId, t: Date.now() / 1000 }));
    } catch (error) {
      failed++;
      console.log(JSON.stringify({ seq, ok: false, t: Date.now() / 1000, error: String(error).slice(0, 300) }));
    }
  }
  await withTimeout(producer.shutdown(), 10000, 'producer.shutdown');
  console.log(JSON.stringify({ done: true, ok, failed }));
}

main().then(
  () => process.exit(0),
  (error) => {
    console.log(JSON.stringify({ done: true, ok: 0, failed: -1, error: String(error) }));
    process.exit(1);
  },
);

// Drive the OFFICIAL RocketMQ 5 Node.js client (rocketmq-client-nodejs 1.0.8, unmodified) as a
// SimpleConsumer. usage (NODE_PATH = the installed node_modules):
//   node node_consumer.js ACCESS_POINT TOPIC GROUP EXPECTED TIMEOUT_S
// One JSON line per message received and acknowledged -- {"body", "msgId", "attempt", "tag", "keys"} --
// and a last line {"done": true, "received": N, "distinct": M}.
'use strict';
const { SimpleConsumer } = require('rocketmq-client-nodejs');

const [accessPoint, topic, group, expectedText, timeoutText] = process.argv.slice(2);
const expected = Number(expectedText);
const deadline = Date.now() + Number(timeoutText) * 1000;

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
  const consumer = new SimpleConsumer({
    endpoints: accessPoint,
    consumerGroup: group,
    subscriptions: new Map([[topic, '*']]),
    awaitDuration: 3000,
    requestTimeout: 3000,
    sessionCredentials,
  });
  await withTimeout(consumer.startup(), 30000, 'consumer.startup');
  const seen = new Set();
  let received = 0;
  while (seen.size < expected && Date.now() < deadline) {
    const messages = await consumer.receive(16, 15000);
    for (const message of messages) {
      await consumer.ack(message);
      received++;
      const body = message.body.toString();
      seen.add(body);
      console.log(JSON.stringify({
        body, msgId: message.messageId, attempt: message.deliveryAttempt, tag: message.tag, keys: message.keys,
      }));
    }
  }
  await withTimeout(consumer.shutdown(), 10000, 'consumer.shutdown');
  console.log(JSON.stringify({ done: true, received, distinct: seen.size }));
}

main().then(
  () => process.exit(0),
  (error) => {
    console.log(JSON.stringify({ done: true, received: 0, distinct: 0, error: String(error) }));
    process.exit(1);
  },
);

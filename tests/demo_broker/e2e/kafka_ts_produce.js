// kafka-ts's producer (always idempotent, acks=-1) against demo_broker, for idempotence_e2e.py:
//   node kafka_ts_produce.js <kafka-ts dir> <port> <topic> <count> <per send>
// Sends <count> records with distinct values ("kts-0" ...) to partition 0, <per send> per send()
// call, and prints one JSON line: {"sent": N}. Exits non-zero, with the error on stderr, when a
// send fails after kafka-ts's own retries.
'use strict';

const [kafkaTsDir, port, topic, count, perSend] = process.argv.slice(2);
const { createKafkaClient } = require(kafkaTsDir);

async function main() {
  const client = createKafkaClient({
    clientId: 'kafka-ts-e2e',
    bootstrapServers: [{ host: '127.0.0.1', port: Number(port) }],
    requestTimeout: 30000,
  });
  const producer = client.createProducer({ allowTopicAutoCreation: true, maxRetries: 10 });
  let sent = 0;
  try {
    while (sent < Number(count)) {
      const n = Math.min(Number(perSend), Number(count) - sent);
      const messages = [];
      for (let i = 0; i < n; ++i) {
        messages.push({ topic, partition: 0, value: `kts-${sent + i}` });
      }
      await producer.send(messages);
      sent += n;
    }
  } finally {
    await producer.close();
  }
  console.log(JSON.stringify({ sent }));
}

main().catch((error) => {
  console.error(`kafka-ts producer failed: ${error && error.stack ? error.stack : error}`);
  process.exit(1);
});

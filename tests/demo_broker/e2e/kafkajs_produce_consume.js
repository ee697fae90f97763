// KafkaJS against demo_broker, for idempotence_e2e.py:
//   node kafkajs_produce_consume.js <kafkajs dir> <port> <topic> <count> <per send>
// An idempotent producer (idempotent: true, acks=-1, so InitProducerId first) sends <count>
// records with distinct values ("kjs-0" ...) to partition 0, <per send> per send() call; then a
// consumer in group "kafkajs-e2e" subscribes from the beginning and reads until it has <count>
// records or 30 s pass. Prints one JSON line: {"sent": N, "values": [...]} (every value the
// consumer was given, in order, duplicates included). Exits non-zero, with the error on stderr,
// when a send fails after KafkaJS's own retries.
'use strict';

const [kafkajsDir, port, topic, count, perSend] = process.argv.slice(2);
const { Kafka, logLevel } = require(kafkajsDir);

async function produce(kafka) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  let sent = 0;
  try {
    while (sent < Number(count)) {
      const n = Math.min(Number(perSend), Number(count) - sent);
      const messages = [];
      for (let i = 0; i < n; ++i) messages.push({ partition: 0, value: `kjs-${sent + i}` });
      await producer.send({ topic, acks: -1, messages });
      sent += n;
    }
  } finally {
    await producer.disconnect();
  }
  return sent;
}

async function consume(kafka) {
  const consumer = kafka.consumer({ groupId: 'kafkajs-e2e', maxWaitTimeInMs: 500 });
  const values = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, 30000);
      consumer
        .run({
          eachMessage: async ({ message }) => {
            values.push(message.value.toString());
            if (values.length >= Number(count)) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return values;
}

async function main() {
  const kafka = new Kafka({
    clientId: 'kafkajs-e2e',
    brokers: [`127.0.0.1:${port}`],
    logLevel: logLevel.ERROR,
    retry: { retries: 5 },
  });
  const sent = await produce(kafka);
  const values = await consume(kafka);
  console.log(JSON.stringify({ sent, values }));
}

main().catch((error) => {
  console.error(`KafkaJS failed: ${error && error.stack ? error.stack : error}`);
  process.exit(1);
});

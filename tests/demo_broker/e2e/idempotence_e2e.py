#!/usr/bin/python3
"""End-to-end tests of demo_broker's idempotent produce with unmodified clients.

kafka-ts's producer (npm; always idempotent, acks=-1), KafkaJS's (npm; idempotent: true, its
records read back by a KafkaJS group consumer), confluent-kafka with enable.idempotence=true
and kcat with -X enable.idempotence=true produce distinct records, some
cases through --fault-drop-produce-response 3 (the broker appends every 3rd produce, then closes
the connection instead of answering it; the client retries on a new connection). Every record
must then be in the log exactly once, in order, and the broker's /metrics and /api/state must
count the retries it recognised. A transactional producer must fail at once with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Each case starts its own broker on a free loopback port
and stops it by PID; every wait is bounded.

    /usr/bin/python3 idempotence_e2e.py --broker build/.../demo_broker --case kcat_idempotent_lost_responses
    /usr/bin/python3 idempotence_e2e.py --broker ... --node-modules build/.../npm/node_modules --case kafka_ts_produce_acks_all
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_e2e import kcat  # noqa: E402
from broker_process import (  # noqa: E402
    CLIENT_TIMEOUT_S, BrokerProcess, Failure, check, exit_with, run_case)
from metrics_e2e import parse_exposition, value  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAULT = ["--fault-drop-produce-response", "3"]


def get(broker, path):
    """GET `path` ("api/state") of the broker's live view, as text."""
    with urllib.request.urlopen(broker.url + path, timeout=CLIENT_TIMEOUT_S) as r:
        return r.read().decode("utf-8")


def metrics(broker):
    return parse_exposition(get(broker, "metrics"))[0]


def state(broker):
    return json.loads(get(broker, "api/state"))


def consume_all(broker, topic):
    """Every value in partition 0 of `topic`, in offset order (kcat reads to the end, exits)."""
    c = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q")
    check(c.returncode == 0, f"kcat -C read {topic} to its end (rc {c.returncode}) {c.stderr}")
    return c.stdout.splitlines()


def check_exactly_once(broker, topic, expected):
    got = consume_all(broker, topic)
    twice = sorted({v for v in got if got.count(v) > 1})
    missing = sorted(set(expected) - set(got))
    check(not twice and not missing,
          f"{topic} holds each of the {len(expected)} records once (duplicated {twice[:5]}, "
          f"missing {missing[:5]})")
    check(got == expected, f"{topic} holds them in the order they were produced")


def check_retries_recognised(broker, at_least=1):
    """The fault fired, and the broker told the retries from new data: counted and logged."""
    faults = len(re.findall(r"fault: Produce v\d+ corr=\d+", broker.log()))
    check(faults >= at_least, f"the broker dropped {faults} produce response(s) (the fault)")
    m = metrics(broker)
    duplicates = value(m, "demo_broker_duplicate_batches_total")
    check(duplicates >= at_least,
          f"/metrics counts {duplicates:.0f} retried batch(es) answered with their offset")
    check(value(m, "demo_broker_producer_ids_issued_total") >= 1, "/metrics counts producer ids")
    check("duplicate batch on" in broker.log(), "--verbose logged each duplicate batch")
    producers = state(broker)["producers"]
    check(producers["duplicate_batches"] == duplicates,
          f"/api/state shows the same {producers['duplicate_batches']} duplicate(s)")
    check(len(producers["recent"]) >= 1 and producers["recent"][0]["producer_id"] >= 0,
          f"/api/state lists the producer ({producers['recent'][:1]})")


# ---- kafka-ts and KafkaJS (npm) ------------------------------------------------------------------

def run_node(node_modules, package, script, broker, *args):
    """Runs `script` with the npm package's folder, the broker's port and `args`; its last line."""
    folder = os.path.join(node_modules or "", package)
    if not node_modules or not os.path.isfile(os.path.join(folder, "package.json")):
        raise Failure(f"{package} is not installed in {node_modules!r}: the CTest fixture "
                      "demo_broker_e2e.install_npm_clients installs it (npm)")
    if shutil.which("node") is None:
        raise Failure("node is not installed (scripts/packages.sh installs nodejs and npm)")
    p = subprocess.run(["node", os.path.join(HERE, script), folder, str(broker.port),
                        *map(str, args)],
                       capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S * 2)
    check(p.returncode == 0, f"{package}: node {script} exited {p.returncode} "
                             f"{p.stderr.strip()[-500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def check_idempotent_acks_all(log, client_id, client):
    """The broker's --verbose log shows `client_id` got a producer id and its acks=-1 produces
    waited in the produce purgatory."""
    tag = re.escape(f"[{client_id}]")
    check(re.search(tag + r" InitProducerId v\d corr=\d+: producer id \d+ epoch 0", log),
          f"{client} got its producer id from InitProducerId")
    check(re.search(tag + r" Produce v\d corr=\d+: completed: every follower caught up", log),
          "its acks=-1 produces waited in the produce purgatory for the followers")


def run_kafka_ts(broker, node_modules, topic, count, per_send):
    result = run_node(node_modules, "kafka-ts", "kafka_ts_produce.js", broker, topic, count,
                      per_send)
    check(result == {"sent": count},
          f"kafka-ts's producer sent {count} records, {per_send} per send() ({result})")


def case_kafka_ts_produce_acks_all(broker, node_modules):
    run_kafka_ts(broker, node_modules, "e2e-kts", 100, 10)
    check_exactly_once(broker, "e2e-kts", [f"kts-{i}" for i in range(100)])
    check_idempotent_acks_all(broker.log(), "kafka-ts-e2e", "kafka-ts")


def case_kafka_ts_retry_after_lost_response(broker, node_modules):
    run_kafka_ts(broker, node_modules, "e2e-kts-lost", 100, 10)
    check_exactly_once(broker, "e2e-kts-lost", [f"kts-{i}" for i in range(100)])
    check_retries_recognised(broker)


def case_kafkajs_idempotent_produce_group_consume(broker, node_modules):
    expected = [f"kjs-{i}" for i in range(100)]
    result = run_node(node_modules, "kafkajs", "kafkajs_produce_consume.js", broker, "e2e-kjs",
                      100, 10)
    check(result["sent"] == 100, f"KafkaJS's idempotent producer sent 100 records ({result['sent']})")
    check(result["values"] == expected,
          f"KafkaJS's group consumer read each of them once, in order (got {len(result['values'])}, "
          f"first {result['values'][:3]})")
    check_exactly_once(broker, "e2e-kjs", expected)
    log = broker.log()
    check_idempotent_acks_all(log, "kafkajs-e2e", "KafkaJS")
    check(re.search(r"\[kafkajs-e2e\] JoinGroup v\d corr=\d+", log),
          "its consumer joined group kafkajs-e2e through the join purgatory")


# ---- confluent-kafka and kcat (librdkafka) --------------------------------------------------------

def case_confluent_idempotent_lost_responses(broker, _):
    from confluent_kafka import Producer
    results = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "batch.num.messages": 10,
                         "reconnect.backoff.max.ms": 200})
    for i in range(200):
        producer.produce("e2e-ck-idem", value=f"ck-{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: results.append((err, msg.offset())))
        if i % 10 == 9:
            producer.poll(0)
            time.sleep(0.01)  # lets each 10 go out as a batch of their own
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    errors = [e for e, _ in results if e is not None]
    check(remaining == 0 and len(results) == 200 and not errors,
          f"confluent-kafka delivered 200 records, idempotent (errors {errors[:3]})")
    offsets = sorted(o for _, o in results)
    check(offsets == list(range(200)), "each at its own offset, 0..199, retries included")
    check_exactly_once(broker, "e2e-ck-idem", [f"ck-{i}" for i in range(200)])
    check_retries_recognised(broker)


def case_kcat_idempotent_lost_responses(broker, _):
    lines = [f"kcat-{i}" for i in range(150)]
    # -E: kcat would otherwise exit when its one broker's connection drops. Batches of 10 make
    # 15 produce requests, every 3rd answer lost; reconnecting within 200 ms keeps it short.
    p = kcat("-E", "-P", "-b", broker.bootstrap, "-t", "e2e-kcat-idem", "-p", "0",
             "-X", "enable.idempotence=true", "-X", "batch.num.messages=10",
             "-X", "reconnect.backoff.max.ms=200", input_text="\n".join(lines) + "\n",
             timeout=CLIENT_TIMEOUT_S * 2)
    check(p.returncode == 0 and "Delivery failed" not in p.stderr,
          f"kcat -P -X enable.idempotence=true produced 150 lines (rc {p.returncode})")
    check_exactly_once(broker, "e2e-kcat-idem", lines)
    check_retries_recognised(broker)


def case_confluent_transactional_refused(broker, _):
    from confluent_kafka import KafkaException, Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "e2e-tx"})
    started = time.monotonic()
    try:
        producer.init_transactions(30)
        raise Failure("init_transactions() succeeded on a broker without transactions")
    except KafkaException as e:
        error = e.args[0]
    elapsed = time.monotonic() - started
    check(error.fatal() and error.name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
          f"a transactional producer fails with a fatal TRANSACTIONAL_ID_AUTHORIZATION_FAILED "
          f"({error.name()}: {error.str()})")
    check(elapsed < 10, f"at once ({elapsed:.1f} s), not after retrying")
    check("does not speak transactions" in error.str(), "the error says why")
    check(re.search(r"transaction refused.*transactional id 'e2e-tx'", broker.log()),
          "the broker logged the refusal without --verbose being needed")


CASES = {
    "kafka_ts_produce_acks_all": ([], case_kafka_ts_produce_acks_all),
    "kafka_ts_retry_after_lost_response": (FAULT, case_kafka_ts_retry_after_lost_response),
    "kafkajs_idempotent_produce_group_consume": ([], case_kafkajs_idempotent_produce_group_consume),
    "confluent_idempotent_lost_responses": (FAULT, case_confluent_idempotent_lost_responses),
    "kcat_idempotent_lost_responses": (FAULT, case_kcat_idempotent_lost_responses),
    "confluent_transactional_refused": ([], case_confluent_transactional_refused),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", required=True, help="path to the demo_broker binary")
    parser.add_argument("--node-modules",
                        help="the folder npm installed kafka-ts and KafkaJS into (node_modules)")
    parser.add_argument("--case", required=True, choices=sorted(CASES))
    args = parser.parse_args()
    if shutil.which("kcat") is None:
        raise Failure("kcat is not installed (Debian package kcat; scripts/packages.sh)")
    extra, run = CASES[args.case]
    with tempfile.TemporaryDirectory(prefix="demo_broker_idempotence_e2e_") as workdir:
        run_case(BrokerProcess(args.broker, workdir, extra, ui=True),
                 lambda b: run(b, args.node_modules))
    return 0


if __name__ == "__main__":
    exit_with(main)

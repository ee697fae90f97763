#!/usr/bin/python3
"""End-to-end tests of demo_broker with the Kafka clients people already use.

Each case starts its own broker binary on 127.0.0.1 port 0 (it prints the port it got), drives it
with kcat, kafka-python or confluent-kafka, checks the result and the broker's --verbose log, then
stops the broker by its PID with SIGTERM and requires a clean exit, so a sanitized broker's leak
and race reports fail the case (broker_process.py starts and stops it, for every e2e script).

    /usr/bin/python3 broker_e2e.py --broker build/.../demo_broker --case kcat_produce_consume
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_process import (  # noqa: E402
    CLIENT_TIMEOUT_S, BrokerProcess, Failure, check, exit_with, run_case)


def kcat(*args, input_text=None, timeout=CLIENT_TIMEOUT_S):
    return subprocess.run(["kcat", *args], input=input_text, capture_output=True, text=True,
                          timeout=timeout)


def waited_ms(log, api, outcome):
    """Waits (ms) of the log lines for `api` requests whose outcome contains `outcome`."""
    pattern = rf"{api} v\d+ corr=\d+: {re.escape(outcome)}.*\(waited ([0-9.]+) ms\)"
    return [float(m) for m in re.findall(pattern, log)]


# ---- the cases -----------------------------------------------------------------------------

def case_kcat_produce_consume(broker):
    n = 200
    lines = [f"message-{i}" for i in range(n)]
    p = kcat("-P", "-b", broker.bootstrap, "-t", "e2e-kcat", "-p", "0",
             input_text="\n".join(lines) + "\n")
    check(p.returncode == 0, f"kcat -P produced {n} messages (rc {p.returncode}) {p.stderr}")
    c = kcat("-C", "-b", broker.bootstrap, "-t", "e2e-kcat", "-p", "0", "-o", "beginning", "-e",
             "-q")
    check(c.returncode == 0, f"kcat -C -o beginning -e exited 0 (rc {c.returncode}) {c.stderr}")
    got = c.stdout.splitlines()
    check(got == lines, f"kcat consumed all {n} messages back in order (got {len(got)})")


def case_kcat_long_poll_early(broker):
    consumer = subprocess.Popen(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", "e2e-longpoll", "-p", "0", "-o", "beginning",
         "-c", "1", "-q", "-u", "-X", "fetch.wait.max.ms=5000", "-X", "fetch.min.bytes=1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        broker.wait_for_log(r"ListOffsets v1 corr=\d+")
        time.sleep(1.5)  # its first fetch is parked by now
        produced = time.monotonic()
        p = kcat("-P", "-b", broker.bootstrap, "-t", "e2e-longpoll", "-p", "0",
                 input_text="wake up\n")
        check(p.returncode == 0, "kcat -P produced one record")
        out, err = consumer.communicate(timeout=CLIENT_TIMEOUT_S)
        elapsed = time.monotonic() - produced
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    check(out.strip() == "wake up", f"the long-polling consumer received the record ({out!r})")
    check(elapsed < 4.0, f"{elapsed:.2f} s after the produce, well before fetch.wait.max.ms=5000")
    early = waited_ms(broker.log(), "Fetch", "completed early")
    check(len(early) >= 1 and max(early) < 5000,
          f"the broker log shows a parked Fetch completed early (waited {early} ms)")


def case_kcat_fetch_timeout_empty(broker):
    m = kcat("-L", "-b", broker.bootstrap, "-t", "e2e-empty")
    check(m.returncode == 0, "kcat -L created the topic through Metadata")
    started = time.monotonic()
    c = kcat("-C", "-b", broker.bootstrap, "-t", "e2e-empty", "-p", "0", "-o", "beginning", "-e",
             "-q", "-X", "fetch.wait.max.ms=1000")
    elapsed = time.monotonic() - started
    check(c.returncode == 0 and c.stdout == "", f"kcat read nothing and exited (rc {c.returncode})")
    expired = waited_ms(broker.log(), "Fetch", "expired after max_wait_ms=1000")
    check(len(expired) >= 1, f"the broker answered a Fetch on expiry ({expired} ms)")
    check(all(1000 <= w < 3000 for w in expired),
          f"each expired after about max_wait_ms=1000 (waited {expired} ms)")
    check(elapsed >= 1.0, f"kcat's empty fetch took {elapsed:.2f} s (>= max_wait_ms)")


def case_kafka_python_produce_acks_all(broker):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                             request_timeout_ms=30000, linger_ms=0)
    futures = [producer.send("e2e-kp-acks", value=f"v{i}".encode(), partition=0)
               for i in range(10)]
    offsets = [f.get(timeout=CLIENT_TIMEOUT_S).offset for f in futures]
    producer.close(timeout=CLIENT_TIMEOUT_S)
    check(offsets == list(range(10)), f"acks=all produce returned offsets 0..9 ({offsets})")
    done = waited_ms(broker.log(), "Produce", "completed: every follower caught up")
    check(len(done) >= 1 and min(done) >= 50,
          f"the broker held them until both followers replicated (waited {done} ms)")


def case_kafka_python_consumer_assign(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    for i in range(5):
        producer.send("e2e-kp-assign", value=f"a{i}".encode(), partition=0)
    producer.flush(timeout=CLIENT_TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10000, fetch_max_wait_ms=500)
    tp = TopicPartition("e2e-kp-assign", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = []
    for message in consumer:
        values.append(message.value.decode())
        if len(values) == 5:
            break
    consumer.close()
    check(values == [f"a{i}" for i in range(5)], f"assign() + seek_to_beginning read {values}")


def case_kafka_python_long_poll_early(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=5000, fetch_min_bytes=1)
    tp = TopicPartition("e2e-kp-longpoll", 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    producer.partitions_for("e2e-kp-longpoll")  # creates the topic
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    received = {}

    def poll():
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline and "at" not in received:
            for records in consumer.poll(timeout_ms=500).values():
                if records:
                    received["at"] = time.monotonic()
                    received["value"] = records[0].value

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(2.0)  # the consumer's fetch is parked by now
    produced = time.monotonic()
    producer.send("e2e-kp-longpoll", value=b"ping", partition=0).get(timeout=CLIENT_TIMEOUT_S)
    thread.join(CLIENT_TIMEOUT_S)
    producer.close()
    consumer.close()
    check(received.get("value") == b"ping", "kafka-python's consumer received the record")
    elapsed = received["at"] - produced
    check(elapsed < 4.0, f"{elapsed:.2f} s after the produce, well before fetch_max_wait_ms=5000")
    early = waited_ms(broker.log(), "Fetch", "completed early")
    check(len(early) >= 1, f"the broker log shows a Fetch completed early ({early} ms)")


def case_confluent_consumer_assign_beginning(broker):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    results = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(5):
        producer.produce("e2e-ck", value=f"c{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: results.append((err, msg.offset())))
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    check(remaining == 0 and [e for e, _ in results] == [None] * 5,
          f"confluent-kafka produced 5 records with acks=all ({results})")
    check([o for _, o in results] == list(range(5)), "at offsets 0..4")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "e2e",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("e2e-ck", 0, OFFSET_BEGINNING)])
    values = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while len(values) < 5 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        check(msg.error() is None, f"no consumer error ({msg.error()})")
        values.append(msg.value().decode())
    consumer.close()
    check(values == [f"c{i}" for i in range(5)], f"assign() at OFFSET_BEGINNING read {values}")


def case_help(binary):
    h = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    check(h.returncode == 0, "--help exits 0")
    for option in ["--listen", "--partitions", "--followers", "--replication-delay-ms",
                   "--max-request-bytes", "--fetch-max-bytes", "--retention-bytes", "--node-id",
                   "--advertised-host", "--port-file", "--verbose", "--demo", "--metrics",
                   "--ui", "--group-initial-rebalance-delay-ms", "--group-min-session-timeout-ms",
                   "--group-max-session-timeout-ms", "--fault-drop-produce-response",
                   "--max-producers-per-partition"]:
        check(option in h.stdout, f"--help describes {option}")
    bad = subprocess.run([binary, "--followers", "2", "--replication-delay-ms", "1,2,3"],
                         capture_output=True, text=True, timeout=30)
    check(bad.returncode != 0 and "one per follower" in bad.stderr,
          "a delay list that does not match --followers is refused with a clear message")
    ui = subprocess.run([binary, "--ui", "127.0.0.1:http"], capture_output=True, text=True,
                        timeout=30)
    check(ui.returncode != 0 and "--ui" in ui.stderr and "'http'" in ui.stderr,
          f"a bad --ui port is refused, naming the option and the value ({ui.stderr.strip()!r})")
    zero = subprocess.run([binary, "--fetch-max-bytes", "0"], capture_output=True, text=True,
                          timeout=30)
    check(zero.returncode != 0 and "--fetch-max-bytes" in zero.stderr,
          f"--fetch-max-bytes 0 is refused, naming the option ({zero.stderr.strip()!r})")
    inverted = subprocess.run([binary, "--group-min-session-timeout-ms", "9000",
                               "--group-max-session-timeout-ms", "8000"],
                              capture_output=True, text=True, timeout=30)
    check(inverted.returncode != 0 and "--group-min-session-timeout-ms" in inverted.stderr,
          f"a session timeout minimum above the maximum is refused ({inverted.stderr.strip()!r})")


CASES = {
    "kcat_produce_consume": ([], case_kcat_produce_consume),
    "kcat_long_poll_early": (["--replication-delay-ms", "10"], case_kcat_long_poll_early),
    "kcat_fetch_timeout_empty": ([], case_kcat_fetch_timeout_empty),
    "kafka_python_produce_acks_all": (["--replication-delay-ms", "50,100"],
                                      case_kafka_python_produce_acks_all),
    "kafka_python_consumer_assign": ([], case_kafka_python_consumer_assign),
    "kafka_python_long_poll_early": (["--followers", "0"], case_kafka_python_long_poll_early),
    "confluent_consumer_assign_beginning": ([], case_confluent_consumer_assign_beginning),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", required=True, help="path to the demo_broker binary")
    parser.add_argument("--case", required=True, choices=sorted([*CASES, "help"]))
    args = parser.parse_args()
    if args.case == "help":
        case_help(args.broker)
        return 0
    if shutil.which("kcat") is None:
        raise Failure("kcat is not installed (Debian package kcat; scripts/packages.sh)")
    extra, run = CASES[args.case]
    with tempfile.TemporaryDirectory(prefix="demo_broker_e2e_") as workdir:
        run_case(BrokerProcess(args.broker, workdir, extra), run)
    return 0


if __name__ == "__main__":
    exit_with(main)

#!/usr/bin/python3
"""End-to-end tests of demo_broker's consumer groups with the clients people already use.

Each case starts its own broker (127.0.0.1 port 0, --verbose, a short initial rebalance delay),
drives it with kcat -G, kafka-python consumers with a group_id, or confluent-kafka's subscribe(),
checks what they consumed, their assignments and the broker's log and metrics, then stops the
broker by its PID (SIGTERM) and requires a clean exit with no sanitizer report. The clients' own
session and heartbeat settings are lowered where a case waits on them; every wait is bounded.

    /usr/bin/python3 groups_e2e.py --broker build/.../demo_broker --case kcat_group_consume
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_e2e import kcat  # noqa: E402
from broker_process import (  # noqa: E402
    CLIENT_TIMEOUT_S, BrokerProcess, Failure, check, exit_with, run_case)
from metrics_e2e import parse_exposition, value  # noqa: E402

DELAY_MS = 100  # --group-initial-rebalance-delay-ms: a lone consumer still waits this long


def metrics(broker):
    """The broker's /metrics, scraped and parsed strictly."""
    import urllib.request
    with urllib.request.urlopen(broker.metrics_url, timeout=CLIENT_TIMEOUT_S) as r:
        return parse_exposition(r.read().decode("utf-8"))[0]


def wait_for(what, condition, timeout=CLIENT_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise Failure(f"timed out after {timeout} s waiting for {what}")


def produce_lines(broker, topic, lines, partition=None):
    args = ["-P", "-b", broker.bootstrap, "-t", topic]
    if partition is not None:
        args += ["-p", str(partition)]
    p = kcat(*args, input_text="".join(f"{line}\n" for line in lines))
    check(p.returncode == 0, f"kcat -P produced {len(lines)} lines to {topic} ({p.stderr.strip()})")


# ---- kcat -G ------------------------------------------------------------------------------------

def case_kcat_group_consume(broker):
    first = [f"first-{i}" for i in range(12)]
    for partition in range(2):
        produce_lines(broker, "e2e-kcat-group", first[partition::2], partition)
    # The README's command: a balanced consumer in group g1, from the beginning of each partition.
    c = kcat("-b", broker.bootstrap, "-G", "g1", "-o", "beginning", "-c", str(len(first)), "-q",
             "e2e-kcat-group")
    check(c.returncode == 0, f"kcat -G g1 consumed and exited (rc {c.returncode}) {c.stderr}")
    check(sorted(c.stdout.splitlines()) == sorted(first),
          f"kcat -G read all {len(first)} records of both partitions")
    log = broker.log()
    for pattern, what in [
            (r"JoinGroup v4 corr=\d+: MEMBER_ID_REQUIRED", "a first JoinGroup told to use an id"),
            (r"JoinGroup v4 corr=\d+: generation 1, leader of 1 member\(s\), protocol range "
             rf"\(join phase ended after the initial rebalance delay \({DELAY_MS} ms\)\) "
             r"\(waited ([0-9.]+) ms\)", "the JoinGroup parked in the join purgatory"),
            (r"SyncGroup v2 corr=\d+: assigned e2e-kcat-group-0,e2e-kcat-group-1",
             "the leader's assignment of both partitions"),
            (r"group g1: generation 1 Stable", "the group became Stable"),
            (r"OffsetCommit v6 corr=\d+: committed", "kcat committed its offsets on exit"),
            (r"LeaveGroup v1 corr=\d+: NONE", "kcat left the group on exit")]:
        found = re.search(pattern, log)
        check(found is not None, f"the broker log shows {what}")
    waited = float(re.search(r"JoinGroup v4 corr=\d+: generation 1.*\(waited ([0-9.]+) ms\)",
                             log).group(1))
    check(waited >= DELAY_MS, f"the join waited the {DELAY_MS} ms initial delay ({waited} ms)")

    # Restarted in the same group, it resumes after what it committed: only the new records.
    second = [f"second-{i}" for i in range(4)]
    for partition in range(2):
        produce_lines(broker, "e2e-kcat-group", second[partition::2], partition)
    again = kcat("-b", broker.bootstrap, "-G", "g1", "-c", str(len(second)), "-q",
                 "e2e-kcat-group")
    check(again.returncode == 0, f"kcat -G g1 ran again (rc {again.returncode}) {again.stderr}")
    check(sorted(again.stdout.splitlines()) == sorted(second),
          f"restarted, it read only the {len(second)} new records ({again.stdout.split()})")
    check(re.search(r"OffsetFetch v5 corr=\d+: e2e-kcat-group-0@6, e2e-kcat-group-1@6",
                    broker.log()) is not None,
          "it asked for the committed offsets (6 per partition) before fetching")

    m = metrics(broker)
    check(value(m, "purgatory_operations_expired_total", purgatory="join") >= 2,
          "the join purgatory counted both initial delays expiring")
    check(value(m, "purgatory_operations_completed_total", purgatory="heartbeat") >= 1,
          "the heartbeat purgatory counted completed sessions")
    check(value(m, "purgatory_wait_duration_seconds_count", purgatory="join") >= 2,
          "the join purgatory's wait histogram has the joins")
    check(value(m, "demo_broker_group_generations_total") >= 2, "two generations counted")
    check(value(m, "demo_broker_consumer_groups") == 1, "one group known (it has offsets)")
    check(value(m, "demo_broker_group_members") == 0, "no member left in it")


# ---- kafka-python: two members split a topic, one leaves, the other takes over -----------------

def case_kafka_python_split_and_take_over(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    topic = "e2e-kp-group"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    for i in range(8):
        producer.send(topic, value=f"before-{i}".encode(), partition=i % 4)
    producer.flush(timeout=CLIENT_TIMEOUT_S)

    def member(name):
        return KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id="kp",
                             client_id=name, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=1000, fetch_max_wait_ms=200)

    consumers = {"a": member("a"), "b": member("b")}
    got = {"a": [], "b": []}
    running = {"a": True, "b": True}

    def poll(name):
        c = consumers[name]
        while running[name]:
            for tp, records in c.poll(timeout_ms=100).items():
                got[name] += [(tp.partition, r.value.decode()) for r in records]

    threads = {n: threading.Thread(target=poll, args=(n,)) for n in consumers}
    for t in threads.values():
        t.start()
    try:
        def parts(name):
            return sorted(tp.partition for tp in consumers[name].assignment())
        wait_for("both members to hold 2 partitions",
                 lambda: len(parts("a")) == 2 and len(parts("b")) == 2)
        check(sorted(parts("a") + parts("b")) == [0, 1, 2, 3],
              f"the two members split the 4 partitions ({parts('a')} and {parts('b')})")
        wait_for("the 8 records", lambda: len(got["a"]) + len(got["b"]) >= 8)
        for name in consumers:
            check(all(p in parts(name) for p, _ in got[name]),
                  f"member {name} read only its own partitions")

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        described = admin.describe_consumer_groups(["kp"])[0]
        check(described.state == "Stable" and len(described.members) == 2,
              f"DescribeGroups: Stable with 2 members ({described.state}, "
              f"{len(described.members)})")
        listed = admin.list_consumer_groups()
        check(("kp", "consumer") in listed, f"ListGroups lists kp ({listed})")
        admin.close()

        a_parts = parts("a")
        running["a"] = False
        threads["a"].join(CLIENT_TIMEOUT_S)
        consumers["a"].close()  # LeaveGroup: b must not wait for a session to expire
        left = time.monotonic()
        wait_for("b to hold all 4 partitions", lambda: parts("b") == [0, 1, 2, 3])
        took = time.monotonic() - left
        check(value(metrics(broker), "demo_broker_group_sessions_expired_total") == 0,
              f"b took over every partition {took:.1f} s after a left, through a's LeaveGroup: "
              "no session had to expire")
        for i in range(4):
            producer.send(topic, value=f"after-{i}".encode(), partition=i)
        producer.flush(timeout=CLIENT_TIMEOUT_S)
        wait_for("b to read the 4 new records",
                 lambda: sum(1 for _, v in got["b"] if v.startswith("after-")) == 4)
        check(all(any(p == ap and v.startswith("after-") for p, v in got["b"]) for ap in a_parts),
              f"b now reads a's former partitions {a_parts} too")
    finally:
        for name in consumers:
            running[name] = False
        for t in threads.values():
            t.join(CLIENT_TIMEOUT_S)
        consumers["b"].close()
        producer.close()
    log = broker.log()
    check(re.search(r"group kp: member a-\S+ left \(LeaveGroup\)", log) is not None,
          "the broker log shows a leaving the group")
    check(re.search(r"JoinGroup v2 corr=\d+: generation \d+, leader of 1 member", log)
          is not None, "b rejoined alone and led the next generation")


# ---- kafka-python: a member killed (no LeaveGroup) is expired by the heartbeat purgatory ---------

KILLED_MEMBER = textwrap.dedent("""
    import sys, time
    from kafka import KafkaConsumer
    c = KafkaConsumer("e2e-kp-kill", bootstrap_servers=sys.argv[1], group_id="kill",
                      client_id="doomed", session_timeout_ms=2000, heartbeat_interval_ms=300,
                      auto_offset_reset="earliest", enable_auto_commit=False)
    while True:
        c.poll(timeout_ms=100)
        if c.assignment():
            print("assigned", flush=True)
""")


def case_kafka_python_killed_member_expires(broker):
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.partitions_for("e2e-kp-kill")  # creates the topic (4 partitions)
    producer.close()
    doomed = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, broker.bootstrap],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    survivor = None
    try:
        check(doomed.stdout.readline().strip() == "assigned", "the doomed member was assigned")
        survivor = KafkaConsumer("e2e-kp-kill", bootstrap_servers=broker.bootstrap,
                                 group_id="kill", client_id="survivor", session_timeout_ms=2000,
                                 heartbeat_interval_ms=300, enable_auto_commit=False)

        def parts():
            survivor.poll(timeout_ms=100)
            return sorted(tp.partition for tp in survivor.assignment())
        wait_for("the survivor's share", lambda: len(parts()) == 2)
        os.kill(doomed.pid, signal.SIGKILL)  # no LeaveGroup, no more heartbeats
        doomed.wait(CLIENT_TIMEOUT_S)
        killed = time.monotonic()
        wait_for("the survivor to hold all 4 partitions", lambda: parts() == [0, 1, 2, 3])
        took = time.monotonic() - killed
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait()
        if survivor is not None:
            survivor.close()
    # Its session ran from its last heartbeat, up to 300 ms before the kill: at least 1.7 s left.
    check(1.5 <= took < 30, f"the survivor took over {took:.1f} s after the kill: once the "
                            "doomed member's 2 s session lapsed, not at once")
    log = broker.log()
    check(re.search(r"group kill: member doomed-\S+ sent no heartbeat within its session timeout "
                    r"\(2000 ms\): expired by the heartbeat purgatory", log) is not None,
          "the broker log shows the heartbeat purgatory expiring the killed member")
    m = metrics(broker)
    check(value(m, "purgatory_operations_expired_total", purgatory="heartbeat") >= 1,
          "the heartbeat purgatory counted the expiry")
    check(value(m, "demo_broker_group_sessions_expired_total") == 1, "one session expired")


# ---- confluent-kafka: subscribe(), commit, restart, resume ---------------------------------------

def case_confluent_subscribe_commit_resume(broker):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    topic = "e2e-ck-group"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic, value=f"m{i}".encode(), partition=0)
    check(producer.flush(CLIENT_TIMEOUT_S) == 0, "10 records produced")

    def consume(n):
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        consumer.subscribe([topic])
        values = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(values) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            check(msg.error() is None, f"no consumer error ({msg.error()})")
            values.append(msg.value().decode())
            if len(values) == n:
                consumer.commit(message=msg, asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=CLIENT_TIMEOUT_S)
        consumer.close()
        return values, [(tp.partition, tp.offset) for tp in committed]

    first, committed = consume(4)
    check(first == [f"m{i}" for i in range(4)], f"subscribe() read m0..m3 ({first})")
    check(committed == [(0, 4)], f"and committed offset 4 ({committed})")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    groups = {g.id: g for g in admin.list_groups(timeout=CLIENT_TIMEOUT_S)}
    check("ck" in groups and groups["ck"].state == "Empty" and groups["ck"].protocol_type ==
          "consumer", "ListGroups + DescribeGroups: ck is Empty (its member closed), a consumer "
          "group")
    second, committed = consume(6)
    check(second == [f"m{i}" for i in range(4, 10)],
          f"restarted in the same group, it resumed after its commit: m4..m9 ({second})")
    check(committed == [(0, 10)], f"and committed offset 10 ({committed})")
    check(re.search(r"OffsetFetch v5 corr=\d+: e2e-ck-group-0@4", broker.log()) is not None,
          "the broker log shows the restarted consumer fetching committed offset 4")


CASES = {
    "kcat_group_consume": (["--partitions", "2"], case_kcat_group_consume),
    "kafka_python_split_and_take_over": (["--partitions", "4"],
                                         case_kafka_python_split_and_take_over),
    "kafka_python_killed_member_expires": (["--partitions", "4",
                                            "--group-min-session-timeout-ms", "1000"],
                                           case_kafka_python_killed_member_expires),
    "confluent_subscribe_commit_resume": ([], case_confluent_subscribe_commit_resume),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", required=True, help="path to the demo_broker binary")
    parser.add_argument("--case", required=True, choices=sorted(CASES))
    args = parser.parse_args()
    if shutil.which("kcat") is None:
        raise Failure("kcat is not installed (Debian package kcat; scripts/packages.sh)")
    extra, run = CASES[args.case]
    with tempfile.TemporaryDirectory(prefix="demo_broker_groups_e2e_") as workdir:
        broker = BrokerProcess(args.broker, workdir, ["--group-initial-rebalance-delay-ms",
                                                       str(DELAY_MS), *extra], metrics=True)
        run_case(broker, run)
    return 0


if __name__ == "__main__":
    exit_with(main)

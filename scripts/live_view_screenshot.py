#!/usr/bin/python3
"""Takes the README's live-view screenshot (docs/img/live-view.png) of a consumer group mid-rebalance.

Starts `demo_broker --ui` on free loopback ports; a kcat -G consumer and a kafka-python one join
group orders-app on a 4-partition topic, an in-process member joins from the page's controls and
is frozen, a second one joins: the join phase then waits for the frozen member while its session
runs out in the heartbeat purgatory. The page is open in headless chromium all along (the
LivePage of the live-view e2e test); the shot is taken at that moment, fetch outcomes hidden.
Everything it starts, it stops.

    /usr/bin/python3 scripts/live_view_screenshot.py --broker build/release/demo_broker/demo_broker \\
        --out docs/img/live-view.png
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "demo_broker", "e2e"))
from broker_process import BrokerProcess, Failure, exit_with  # noqa: E402
from live_view_e2e import LivePage, get_state, post  # noqa: E402

GROUP, TOPIC = "orders-app", "orders"
KAFKA_PYTHON_MEMBER = f"""
import sys
from kafka import KafkaConsumer
c = KafkaConsumer("{TOPIC}", bootstrap_servers=sys.argv[1], group_id="{GROUP}",
                  client_id="kafka-python-a", session_timeout_ms=10000, heartbeat_interval_ms=1000,
                  max_poll_interval_ms=30000, auto_offset_reset="earliest")
while True:
    c.poll(timeout_ms=100)
"""
MEMBER = (f'{{"group": "{GROUP}", "topic": "{TOPIC}", "session_timeout_ms": 10000, '
          '"heartbeat_interval_ms": 1000}')


def wait(what, condition, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise Failure(f"timed out waiting for {what}")
        time.sleep(0.1)


def members(broker):
    groups = get_state(broker)["groups"]
    return groups[0] if groups else {"state": None, "members_total": 0, "join_phase": None}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", required=True, help="path to the demo_broker binary")
    parser.add_argument("--out", required=True, help="where to write the PNG")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="live_view_screenshot_") as workdir:
        broker = BrokerProcess(args.broker, workdir, ["--partitions", "4",
                                                      "--group-initial-rebalance-delay-ms", "300"],
                               ui=True)
        clients = []
        try:
            with LivePage(broker, workdir, window="1400,1700") as page:
                clients.append(subprocess.Popen(
                    ["kcat", "-b", broker.bootstrap, "-G", GROUP, "-q", "-X",
                     "session.timeout.ms=10000", TOPIC],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                clients.append(subprocess.Popen(
                    [sys.executable, "-c", KAFKA_PYTHON_MEMBER, broker.bootstrap],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                wait("2 members Stable", lambda: (g := members(broker))["state"] == "Stable" and
                     g["members_total"] == 2)
                post(broker, "api/members/start", json_body=MEMBER)
                wait("3 members Stable", lambda: (g := members(broker))["state"] == "Stable" and
                     g["members_total"] == 3)
                post(broker, "api/produce", topic=TOPIC, partition=1, count=20)
                post(broker, "api/members/freeze", group=GROUP, member="live-view-1")
                time.sleep(2)  # its session runs down
                post(broker, "api/members/start", json_body=MEMBER)
                wait("the join phase waiting for the frozen member", lambda: (
                    jp := members(broker)["join_phase"]) and jp["rejoined"] >= 3)
                time.sleep(1)
                page.evaluate("document.querySelector('#outcome-filter input[value=fetch]')"
                              ".click()")
                time.sleep(0.5)
                page.screenshot(args.out, down_to="main")
        finally:
            for c in clients:
                c.kill()
                c.wait()
            broker.stop()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    exit_with(main)

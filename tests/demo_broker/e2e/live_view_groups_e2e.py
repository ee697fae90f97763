#!/usr/bin/python3
"""End-to-end test of the live view's consumer groups in a real browser.

Starts `demo_broker --ui` (4 partitions per topic, a 300 ms initial rebalance delay, sessions from
500 ms). Two kafka-python consumers, each its own process, join group `lv` on a 4-partition
topic; the page, open in headless chromium all along, must show lv Stable with 2 members holding 2
partitions each. One is killed (SIGKILL: no LeaveGroup); the page must then show the heartbeat
purgatory expiring it, the join phase of the rebalance, and the survivor holding all 4.
Then the page's group controls, clicked in the page: an in-process member started in lv takes 2
partitions from the survivor; frozen, the page shows its session running out, then the heartbeat
purgatory expiring it; thawed, it joins again; stopped, it leaves with LeaveGroup. Bad input
posted to the same endpoints gets 400 or 404 naming the problem, a 17th member 429. Every
/api/state read is checked against the documented shape. Each wait polls with a deadline; the
broker is stopped by its PID and must exit cleanly.

    /usr/bin/python3 live_view_groups_e2e.py --broker build/.../demo_broker [--screenshot F]
"""
import argparse
import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_process import (  # noqa: E402
    CLIENT_TIMEOUT_S, BrokerProcess, Failure, check, exit_with, run_case)
from live_view_e2e import (  # noqa: E402
    CHROMIUM, STATE, LivePage, check_semantics, get_state, post, validate)

GROUP = "lv"
TOPIC = "lv-topic"
SESSION_MS = 3000  # the kafka-python members'
FROZEN_SESSION_MS = 10000  # the in-process member's: time to see its session run out on the page
FROZEN_HEARTBEAT_MS = 1000

# A kafka-python consumer in group lv that prints its partitions each time they change.
MEMBER = textwrap.dedent(f"""
    import sys
    from kafka import KafkaConsumer
    c = KafkaConsumer("{TOPIC}", bootstrap_servers=sys.argv[1], group_id="{GROUP}",
                      client_id=sys.argv[2], session_timeout_ms={SESSION_MS},
                      heartbeat_interval_ms=300, max_poll_interval_ms=30000,
                      auto_offset_reset="earliest", enable_auto_commit=False)
    last = None
    while True:
        c.poll(timeout_ms=100)
        parts = sorted(tp.partition for tp in c.assignment())
        if parts != last:
            print("assigned", parts, flush=True)
            last = parts
""")


def state(broker, quiet=False):
    """GET /api/state, checked against the documented shape (the checks' lines unprinted when
    quiet: a wait reads it many times)."""
    s = get_state(broker)
    with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        validate(s, STATE)
        check_semantics(s)
    return s


def wait_state(broker, what, predicate, timeout=CLIENT_TIMEOUT_S):
    """The first /api/state (shape checked) for which predicate(state) is truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = state(broker, quiet=True)
        if predicate(s):
            print(f"ok   /api/state shows {what}", flush=True)
            return s
        time.sleep(0.05)
    raise Failure(f"/api/state never showed {what} within {timeout} s")


def group_of(s, name=GROUP):
    return next((g for g in s["groups"] if g["group"] == name), None)


def holdings(s, name=GROUP):
    """{client_id: [partitions]} of a Stable group; None otherwise."""
    g = group_of(s, name)
    if not g or g["state"] != "Stable":
        return None
    return {m["client_id"]: sorted(int(p.rsplit("-", 1)[1]) for p in m["assigned"] or [])
            for m in g["members"]}


def rows(dom, name=GROUP):
    """The member rows the page shows for group `name`: {client id: row element}."""
    return {e["data-client-id"]: e for e in dom.elements
            if e["tag"] == "tr" and "data-member" in e and f"group-{name}" in e["parents"]}


def shows_group(dom, state_name, parts_by_client):
    cards = dom.find(**{"data-group": GROUP})
    if not cards or cards[0]["data-state"] != state_name:
        return False
    shown = {c: sorted(int(p.rsplit("-", 1)[1]) for p in r["data-partitions"].split(",") if p)
             for c, r in rows(dom).items()}
    return cards[0]["data-members"] == str(len(parts_by_client)) and shown == parts_by_client


def outcome_lines(dom, purgatory, outcome, key=None):
    return [e for e in dom.find(**{"data-purgatory": purgatory, "data-outcome": outcome})
            if e["tag"] == "li" and (key is None or e["data-key"] == key)]


def start_member(broker, client_id):
    return subprocess.Popen([sys.executable, "-c", MEMBER, broker.bootstrap, client_id],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def post_json(broker, path, body):
    return post(broker, path, json_body=body)


def real_clients(broker, page):
    """Two kafka-python members; one killed; the page shows the expiry and the takeover."""
    a = start_member(broker, "real-a")
    b = start_member(broker, "real-b")
    try:
        s = wait_state(broker, f"{GROUP} Stable with real-a and real-b holding 2 partitions each",
                       lambda s: (h := holdings(s)) and sorted(h) == ["real-a", "real-b"] and
                       all(len(p) == 2 for p in h.values()))
        h = holdings(s)
        check(sorted(h["real-a"] + h["real-b"]) == [0, 1, 2, 3],
              f"/api/state: the two members split the 4 partitions ({h})")
        g = group_of(s)
        check(g["protocol_type"] == "consumer" and g["leader"] is not None,
              f"with a protocol ({g['protocol']}) and a leader")
        check(all(m["session"] and 0 < m["session"]["remaining_ms"] <= SESSION_MS
                  for m in g["members"]),
              "each member's session waits in the heartbeat purgatory, at most 3000 ms left")
        dom = page.wait_for(f"{GROUP} Stable with 2 members, 2 partitions each",
                           lambda d: shows_group(d, "Stable", h))
        heartbeat_keys = [e for e in dom.find(**{"data-waiting": "1"})
                          if "purgatory-heartbeat" in e["parents"]]
        check(len(heartbeat_keys) >= 2, "the heartbeat purgatory panel lists both sessions")

        a_id = next(m["member_id"] for m in g["members"] if m["client_id"] == "real-a")
        os.kill(a.pid, signal.SIGKILL)  # no LeaveGroup, no more heartbeats
        a.wait(CLIENT_TIMEOUT_S)
        killed = time.monotonic()
        s = wait_state(broker, "real-b holding all 4 partitions after real-a expired",
                       lambda s: holdings(s) == {"real-b": [0, 1, 2, 3]} and any(
                           o["key"] == f"{GROUP}/{a_id}" and o["outcome"] == "expired"
                           for o in s["outcomes"]))
        took = time.monotonic() - killed
        # Its session ran from its last heartbeat, at most 300 ms before the kill.
        check(SESSION_MS / 1000 - 0.5 <= took < 60,
              f"the takeover came {took:.1f} s after the kill: when real-a's {SESSION_MS} ms "
              "session ran out, not at once")
        expired = next(o for o in s["outcomes"] if o["key"] == f"{GROUP}/{a_id}")
        check(expired["purgatory"] == "heartbeat" and re.fullmatch(
            rf"member {re.escape(a_id)} of {GROUP} expired by the heartbeat purgatory after "
            rf"[0-9.]+ s without a heartbeat; {GROUP} rebalances", expired["text"]),
            f"/api/state: {expired['text']}")
        joins = [o for o in s["outcomes"] if o["purgatory"] == "join" and o["seq"] > expired["seq"]]
        check(joins and "starts with 1 member(s), leader real-b-" in joins[0]["text"],
              f"then the join phase: {joins and joins[0]['text']}")

        def takeover(d):
            lines = outcome_lines(d, "heartbeat", "expired", f"{GROUP}/{a_id}")
            return (shows_group(d, "Stable", {"real-b": [0, 1, 2, 3]}) and lines and
                    re.search(r"member real-a-\S+ of lv expired by the heartbeat purgatory after "
                              r"[0-9.]+ s without a heartbeat; lv rebalances", lines[0]["text"])
                    and any("starts with 1 member(s), leader real-b-" in e["text"]
                            for e in dom_join_lines(d)))
        dom = page.wait_for("real-a expired by the heartbeat purgatory, the "
                           "rebalance, and real-b holding all 4 partitions", takeover)
        counter = [e for e in dom.find(**{"data-counter": "expired"})
                   if "purgatory-heartbeat" in e["parents"]]
        check(counter and int(re.match(r"\s*(\d+)", counter[0]["text"]).group(1)) >= 1,
              f"the heartbeat panel counts the expiry ({counter and counter[0]['text']!r})")
        return b
    except BaseException:
        b.kill()
        b.wait()
        raise
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()


def dom_join_lines(dom):
    return [e for e in dom.elements if e["tag"] == "li" and e.get("data-purgatory") == "join"]


def use_page(page, what, script, answer):
    """Does on the page what a person would (`script`: JavaScript that fills in and clicks, true
    when it found its control), then waits for the page to show the broker's 200 answer."""
    page.evaluate("document.querySelector('#group-message').textContent = ''")
    check(page.evaluate(script) is True, f"the page has the control to {what}")
    page.wait_for(f"the broker's answer to '{what}' ({answer})", lambda d: any(
        e["text"].startswith("ok:") and answer in e["text"] for e in d.find(id="group-message")))


def click(action, member):
    return (f"(() => {{ const b = document.querySelector('#groups button[data-action=\"{action}\"]"
            f"[data-member=\"{member}\"]'); if (!b) return false; b.click(); return true; }})()")


def controls(broker, page, screenshot):
    """The page's group controls, clicked: start, freeze (expired), thaw, stop; bad input
    refused."""
    use_page(page, "start an in-process member", f"""(() => {{
        const f = document.querySelector("#f-member"); if (!f) return false;
        f.elements.group.value = "{GROUP}"; f.elements.topic.value = "{TOPIC}";
        f.elements.session_timeout_ms.value = "{FROZEN_SESSION_MS}";
        f.elements.heartbeat_interval_ms.value = "{FROZEN_HEARTBEAT_MS}";
        f.querySelector("button").click(); return true; }})()""", '"member":"live-view-1"')
    s = wait_state(broker, "live-view-1 and real-b holding 2 partitions each",
                   lambda s: (h := holdings(s)) and sorted(h) == ["live-view-1", "real-b"] and
                   all(len(p) == 2 for p in h.values()))
    two_each = holdings(s)
    check(sorted(two_each["real-b"] + two_each["live-view-1"]) == [0, 1, 2, 3],
          f"the in-process member and the kafka-python one split the topic ({two_each})")
    lv1 = next(m for m in group_of(s)["members"] if m["client_id"] == "live-view-1")
    check(lv1["in_process"] == "live-view-1" and lv1["client_host"] == "in-process",
          "/api/state marks it in-process")
    page.wait_for("live-view-1 in lv with 2 partitions and its buttons",
                 lambda d: shows_group(d, "Stable", two_each) and d.find(**{
                     "data-action": "freeze", "data-member": "live-view-1"}))

    use_page(page, "freeze live-view-1", click("freeze", "live-view-1"), '"frozen":true')
    frozen_at = time.monotonic()
    # A heartbeating member's session never has less than its session minus one interval left;
    # a frozen one's runs on down.
    running_out = FROZEN_SESSION_MS - 2 * FROZEN_HEARTBEAT_MS

    def session_running_out(d):
        r = rows(d).get("live-view-1")
        return (r and r["data-frozen"] == "true" and r["data-session-left-ms"] != "" and
                int(r["data-session-left-ms"]) < running_out)
    dom = page.wait_for(f"frozen live-view-1's session running out (below "
                       f"{running_out} ms of {FROZEN_SESSION_MS})", session_running_out)
    check(dom.find(**{"data-action": "thaw", "data-member": "live-view-1"}),
          "with a thaw button in place of freeze")
    if screenshot:
        page.screenshot(screenshot)
    s = wait_state(broker, "live-view-1 expired and real-b holding all 4 again",
                   lambda s: holdings(s) == {"real-b": [0, 1, 2, 3]} and any(
                       o["key"] == f"{GROUP}/{lv1['member_id']}" and o["outcome"] == "expired"
                       for o in s["outcomes"]),
                   timeout=FROZEN_SESSION_MS / 1000 + CLIENT_TIMEOUT_S)
    took = time.monotonic() - frozen_at
    check(took >= FROZEN_SESSION_MS / 1000 - FROZEN_HEARTBEAT_MS / 1000 - 0.5,
          f"the heartbeat purgatory expired it {took:.1f} s after the freeze: its "
          f"{FROZEN_SESSION_MS} ms session, not sooner")
    loose = next(m for m in s["in_process_members"] if m["name"] == "live-view-1")
    check(loose["frozen"] and loose["phase"] == "stable",
          "it is still listed, frozen (it does not know it was removed)")
    page.wait_for("its expiry, and live-view-1 out of the group", lambda d: (
        shows_group(d, "Stable", {"real-b": [0, 1, 2, 3]}) and d.find(
            **{"data-loose-member": "live-view-1"}) and any(
            re.search(r"member live-view-1-\S+ of lv expired by the heartbeat purgatory after "
                      r"10 s without a heartbeat; lv rebalances", e["text"])
            for e in outcome_lines(d, "heartbeat", "expired"))))

    use_page(page, "thaw live-view-1", click("thaw", "live-view-1"), '"frozen":false')
    wait_state(broker, "live-view-1 back in lv with 2 partitions",
               lambda s: (h := holdings(s)) and len(h.get("live-view-1", [])) == 2)
    page.wait_for("live-view-1 back in lv, with its stop button",
                  lambda d: d.find(**{"data-action": "stop", "data-member": "live-view-1"}) and
                  "live-view-1" in rows(d))
    use_page(page, "stop live-view-1", click("stop", "live-view-1"), '"leave_group":"NONE"')
    s = wait_state(broker, "real-b holding all 4 after the LeaveGroup",
                   lambda s: holdings(s) == {"real-b": [0, 1, 2, 3]})
    check(not s["in_process_members"], "a stopped member is no longer listed")
    left = [o for o in s["outcomes"] if o["purgatory"] == "heartbeat" and
            o["outcome"] == "completed" and "left (LeaveGroup)" in o["text"]]
    check(left and left[-1]["text"].startswith("member live-view-1-"),
          f"its leave is told: {left and left[-1]['text']}")

    # Bad input, named.
    for path, body, want_status, want in [
            ("api/members/start", '{"group": "lv", "topic": ', 400, "the body is not valid JSON"),
            ("api/members/start", '{"group": "lv"}', 400, "field 'topic' is required"),
            ("api/members/start", '{"group": "lv", "topic": "t", "session_timeout_ms": 100}', 400,
             "field 'session_timeout_ms' must be an integer in 500.."),
            ("api/members/start", '{"group": "no spaces", "topic": "t"}', 400,
             "field 'group' is not a valid name"),
            ("api/members/freeze", '{"group": "nope", "member": "live-view-1"}', 404,
             "unknown group 'nope'"),
            ("api/members/stop", '{"group": "lv", "member": "live-view-99"}', 404,
             "group 'lv' has no in-process member 'live-view-99'"),
            ("api/members/stop", '{"group": "lv", "member": "real-b"}', 404,
             "the page controls only the members it started")]:
        status, text = post_json(broker, path, body)
        check(status == want_status and want in text,
              f"{path} {body} answers {want_status} naming the problem ({status} {text.strip()!r})")
    for i in range(16):
        status, text = post(broker, "api/members/start", group="crowd", topic="crowd",
                            session_timeout_ms=5000)
        check(status == 200, f"in-process member {i + 1} of 16 started ({status})")
    status, text = post(broker, "api/members/start", group="crowd", topic="crowd")
    check(status == 429 and "16 in-process members" in text,
          f"a 17th is refused with 429 ({text.strip()!r})")
    wait_state(broker, "the 16 in crowd Stable", lambda s: (h := holdings(s, "crowd")) and
               len(h) == 16 and sum(len(p) for p in h.values()) == 4)


def run(broker, workdir, screenshot):
    s = state(broker)
    check(s["groups"] == [] and s["in_process_members"] == [],
          "/api/state before any client: no group, no in-process member")
    with LivePage(broker, workdir, window="1400,1500") as page:
        page.wait_for("no consumer group yet", lambda d: any(
            "no consumer group yet" in e["text"] for e in d.find(id="groups-list")))
        survivor = real_clients(broker, page)
        try:
            controls(broker, page, screenshot)
        finally:
            survivor.kill()
            survivor.wait()
        polls = int(page.dom().find(tag="body")[0].get("data-polls", "0"))
        check(polls >= 20, f"the page polled /api/state all along ({polls} polls)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", required=True, help="path to the demo_broker binary")
    parser.add_argument("--screenshot", help="also save a screenshot of the page there")
    args = parser.parse_args()
    if shutil.which(CHROMIUM) is None:
        raise Failure(f"{CHROMIUM} is not installed (scripts/packages.sh installs it)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="demo_broker_ui_groups_") as workdir:
        extra = ["--partitions", "4", "--group-initial-rebalance-delay-ms", "300",
                 "--group-min-session-timeout-ms", "500"]
        run_case(BrokerProcess(args.broker, workdir, extra, ui=True),
                 lambda b: run(b, workdir, args.screenshot))
    print(f"live view groups e2e: every check passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    exit_with(main)

#!/usr/bin/python3
"""End-to-end test of demo_broker's live view (--ui) in a real browser.

Starts `demo_broker --listen 127.0.0.1:0 --ui 127.0.0.1:0`, validates GET /api/state against the
shape documented in docs/live-view.md, parks a long-poll fetch through kcat, and loads the page
in headless Debian chromium (--dump-dom after the page has polled): the rendered page must show
the fetch waiting on its key and the timing wheel holding its timeout. Then kcat produces, the
consumer gets the record early, and the page must show "fetch on live-0 completed early"; a
short kcat fetch on an empty partition must show as expired. The page's controls answer 400
naming a bad field, a long-poll fetch and a produce started from them complete early, and the
demo button plays the scenarios (once at a time).
With --rss, 1500 polls of /api/state must not grow the broker's memory. Stops the broker by its
PID and requires a clean exit.

    /usr/bin/python3 live_view_e2e.py --broker build/.../demo_broker [--rss] [--screenshot F]
"""
import argparse
import base64
import html.parser
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_e2e import kcat  # noqa: E402
from broker_process import (  # noqa: E402
    CLIENT_TIMEOUT_S, BrokerProcess, Failure, check, exit_with, run_case)

CHROMIUM = "/usr/bin/chromium"
BROWSER_TIMEOUT_S = 90

# The documented shape of GET /api/state (docs/live-view.md). A dict is an object with exactly
# these keys; [x] an array of x; a tuple a choice (of types or shapes); float accepts int;
# By(f) a shape that depends on the value (f(value) returns it).
class By:
    def __init__(self, shape_of):
        self.shape_of = shape_of


NUM = (int, float)
NONE = type(None)
OPERATION = {"age_ms": NUM, "remaining_ms": NUM, "timeout_ms": NUM, "key_count": int}
# A purgatory's keys: fetch and produce watch partitions, join groups, heartbeat members.
KEY_FIELDS = {"fetch": {"topic": str, "partition": int}, "produce": {"topic": str, "partition": int},
              "join": {"group": str}, "heartbeat": {"group": str, "member": str}}
BUCKET = {"le": (int, str), "count": int}


def purgatory_shape(p):
    key = {"key": str, **KEY_FIELDS.get(p.get("name"), {}), "waiting": int,
           "operations": [OPERATION]}
    return {
        "name": str, "waiting": int, "watched": int, "completed_total": int, "expired_total": int,
        "shut_down_total": int, "cancelled_total": int,
        "wait_ms": {"count": int, "p50": NUM, "p99": NUM, "max": NUM, "buckets": [BUCKET]},
        "keys_total": int, "keys": [key]}


LEVEL = {"tick_ms": NUM, "interval_ms": NUM, "tasks": int, "current_time_offset_ms": NUM,
         "buckets": [int], "ahead": int}
SESSION = {"age_ms": NUM, "remaining_ms": NUM, "timeout_ms": NUM}
JOIN_PHASE = {"ends_at": str, "rejoined": int, "awaited": int, "age_ms": (NUM, NONE),
              "remaining_ms": (NUM, NONE), "timeout_ms": (NUM, NONE)}
MEMBER = {"member_id": str, "client_id": str, "client_host": str, "session_timeout_ms": int,
          "rebalance_timeout_ms": int, "leader": bool, "new": bool, "rejoined": bool,
          "awaiting_sync": bool, "assigned": ([str], NONE), "assignment_bytes": int,
          "session": (SESSION, NONE), "in_process": (str, NONE)}
GROUP = {"group": str, "state": str, "generation": int, "protocol_type": (str, NONE),
         "protocol": (str, NONE), "leader": (str, NONE), "members_total": int,
         "pending_members": int, "join_phase": (JOIN_PHASE, NONE), "members": [MEMBER]}
IN_PROCESS_MEMBER = {"name": str, "group": str, "topic": str, "member_id": (str, NONE),
                     "phase": str, "frozen": bool, "generation": int, "assigned": [str],
                     "heartbeats": int, "error": (str, NONE), "session_timeout_ms": int,
                     "heartbeat_interval_ms": int}
STATE = {
    "version": int, "uptime_ms": NUM,
    "broker": {"kafka_port": int, "node_id": int, "connections_open": int, "requests": int,
               "demo_running": bool, "replication_delays_ms": [int]},
    "purgatories": [By(purgatory_shape)],
    "timer": {"tasks": int, "wheel_size": int, "wheel_time_lag_ms": NUM,
              "next_expiration_in_ms": (NUM, NONE), "levels": [LEVEL]},
    "partitions_total": int,
    "partitions": [{"key": str, "topic": str, "partition": int, "log_start": int, "log_end": int,
                    "high_watermark": int, "follower_offsets": [int]}],
    "producers": {"ids_issued": int, "states": int, "states_forgotten": int,
                  "duplicate_batches": int,
                  "refused": {"OUT_OF_ORDER_SEQUENCE_NUMBER": int, "INVALID_PRODUCER_EPOCH": int,
                              "UNKNOWN_PRODUCER_ID": int},
                  "transactions_refused": int,
                  "recent": [{"key": str, "topic": str, "partition": int, "producer_id": int,
                              "epoch": int, "last_sequence": int, "last_offset": int,
                              "batches": int}]},
    "groups_total": int,
    "groups": [GROUP],
    "in_process_members": [IN_PROCESS_MEMBER],
    "last_outcome_seq": int,
    "outcomes": [{"seq": int, "at_ms": NUM, "purgatory": str, "key": str, "outcome": str,
                  "waited_ms": NUM, "why": str, "text": str}]}
GROUP_STATES = {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}


def validate(value, shape, path="state"):
    if isinstance(shape, By):
        validate(value, shape.shape_of(value if isinstance(value, dict) else {}), path)
    elif isinstance(shape, dict):
        check(isinstance(value, dict), f"{path} is an object")
        check(set(value) == set(shape),
              f"{path} has exactly the documented keys (extra {set(value) - set(shape)}, "
              f"missing {set(shape) - set(value)})")
        for k, s in shape.items():
            validate(value[k], s, f"{path}.{k}")
    elif isinstance(shape, list):
        check(isinstance(value, list), f"{path} is an array")
        for i, v in enumerate(value):
            validate(v, shape[0], f"{path}[{i}]")
    elif isinstance(shape, tuple) and any(not isinstance(s, type) for s in shape):
        for choice in shape:  # shapes among the types: the first that fits
            try:
                validate(value, choice, path)
                return
            except Failure:
                pass
        raise Failure(f"{path} = {value!r} fits none of {shape}")
    else:
        types = shape if isinstance(shape, tuple) else (shape,)
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok:
            raise Failure(f"{path} = {value!r} is not {types}")


def check_semantics(s):
    """What the page relies on beyond types."""
    check(s["version"] == 2, "version 2")
    names = [p["name"] for p in s["purgatories"]]
    check(names == ["fetch", "produce", "join", "heartbeat"],
          f"the purgatories are fetch, produce, join and heartbeat ({names})")
    for p in s["purgatories"]:
        check(p["keys_total"] >= len(p["keys"]), f"{p['name']}: keys_total >= keys listed")
        check(sum(b["count"] for b in p["wait_ms"]["buckets"]) == p["wait_ms"]["count"],
              f"{p['name']}: the wait histogram's buckets add up to its count")
        check(p["wait_ms"]["buckets"][-1]["le"] == "+Inf", f"{p['name']}: last bucket is +Inf")
        for k in p["keys"]:
            check(1 <= k["waiting"] and len(k["operations"]) <= k["waiting"],
                  f"{p['name']} {k['key']}: 0 < listed <= waiting")
    t = s["timer"]
    check(t["tasks"] == sum(level["tasks"] for level in t["levels"]),
          "the timer's levels add up to its tasks")
    for i, level in enumerate(t["levels"]):
        check(level["buckets"] == [] or len(level["buckets"]) == t["wheel_size"],
              f"level {i} lists no bucket or wheel_size of them")
        check(level["buckets"] == [] or sum(level["buckets"]) + level["ahead"] == level["tasks"],
              f"level {i}'s buckets and the tasks moved down ahead add up to its tasks")
    check(s["groups_total"] >= len(s["groups"]), "groups_total >= groups listed")
    in_process = {m["name"] for m in s["in_process_members"]}
    for g in s["groups"]:
        check(g["state"] in GROUP_STATES, f"group {g['group']}: a Kafka state ({g['state']})")
        check(g["members_total"] >= len(g["members"]), f"group {g['group']}: total >= listed")
        check((g["join_phase"] is not None) == (g["state"] == "PreparingRebalance"),
              f"group {g['group']}: a join phase exactly while PreparingRebalance")
        if g["join_phase"]:
            jp = g["join_phase"]
            check(jp["rejoined"] + jp["awaited"] == g["members_total"],
                  f"group {g['group']}: rejoined + awaited = its members")
            check(jp["ends_at"] in ("initial delay", "rebalance timeout"),
                  f"group {g['group']}: the join phase ends at {jp['ends_at']}")
        for m in g["members"]:
            check(m["in_process"] is None or m["in_process"] in in_process,
                  f"member {m['member_id']}: its in-process name is listed")


def get_state(broker, since=0):
    with urllib.request.urlopen(f"{broker.url}api/state?since={since}",
                                timeout=CLIENT_TIMEOUT_S) as r:
        check(r.status == 200, "GET /api/state answered 200")
        ctype = r.headers.get("Content-Type", "")
        check(ctype.startswith("application/json"), f"/api/state is JSON ({ctype})")
        return json.loads(r.read().decode("utf-8"))


def post(broker, path, json_body=None, **fields):
    """POSTs `fields` as a form, or `json_body` (a str, sent as is) as JSON."""
    if json_body is None:
        req = urllib.request.Request(broker.url + path, method="POST",
                                     data=urllib.parse.urlencode(fields).encode())
    else:
        req = urllib.request.Request(broker.url + path, method="POST", data=json_body.encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT_S) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_state(broker, what, predicate, timeout=CLIENT_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = get_state(broker)
        if predicate(s):
            return s
        time.sleep(0.05)
    raise Failure(f"/api/state never showed {what}")


def fetch_key(s, key):
    keys = {k["key"]: k for k in s["purgatories"][0]["keys"]}
    return keys.get(key)


class Dom(html.parser.HTMLParser):
    """The elements of a dumped DOM that carry data-* attributes, with their text."""

    def __init__(self, text):
        super().__init__()
        self.elements, self._stack = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, **dict(attrs), "text": "", "parents": [
            e.get("id") for e in self._stack if e.get("id")]}
        if tag not in ("br", "input", "meta", "img", "path", "rect"):
            self._stack.append(element)
        self.elements.append(element)

    def handle_endtag(self, tag):
        while self._stack:
            if self._stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for e in self._stack:
            e["text"] += data

    def find(self, **attrs):
        return [e for e in self.elements if all(e.get(k) == v for k, v in attrs.items())]


def chromium_args(profile, window):
    return [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-extensions", f"--user-data-dir={profile}",
            f"--window-size={window}"]


def render_page(broker, workdir, polls=2, screenshot=None, window="1400,1000"):
    """The page as headless chromium renders it once it polled /api/state `polls` times."""
    profile = tempfile.mkdtemp(prefix="chromium-", dir=workdir)
    args = chromium_args(profile, window) + [f"--virtual-time-budget={1000 + 300 * polls}"]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    r = subprocess.run([*args, broker.url], capture_output=True, text=True,
                       timeout=BROWSER_TIMEOUT_S)
    check(r.returncode == 0, f"chromium exited 0 (rc {r.returncode}) {r.stderr[-500:]}")
    shutil.rmtree(profile, ignore_errors=True)
    if screenshot:
        return None
    dom = Dom(r.stdout)
    body = dom.find(tag="body")
    check(body and int(body[0].get("data-polls", "0")) >= 1,
          f"the page polled /api/state (data-polls={body and body[0].get('data-polls')})")
    return dom


class LivePage:
    """The page open in one headless chromium tab that stays open, polling /api/state in real
    time as a person's browser would; dom() reads what it shows at that moment. Speaks the
    DevTools protocol over --remote-debugging-pipe (JSON messages ended by NUL on fds 3 and 4),
    so it needs no module beyond the standard library, and reading the DOM again costs
    milliseconds instead of a browser start. A context manager: on exit it closes the browser,
    and kills the process group it started if the browser does not close."""

    def __init__(self, broker, workdir, window="1400,1000"):
        to_browser, self._out = os.pipe()
        self._in, from_browser = os.pipe()

        def on_fds_3_and_4():  # in the child: the pipe's ends where chromium looks for them
            a, b = os.dup(to_browser), os.dup(from_browser)
            os.dup2(a, 3)
            os.dup2(b, 4)
        profile = tempfile.mkdtemp(prefix="chromium-", dir=workdir)
        self._err = open(os.path.join(workdir, "chromium.log"), "w")
        self.proc = subprocess.Popen(
            chromium_args(profile, window) + ["--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._err,
            preexec_fn=on_fds_3_and_4, close_fds=False, start_new_session=True)
        os.close(to_browser)
        os.close(from_browser)
        self._buf, self._next_id = b"", 0
        try:
            target = self._call("Target.createTarget", url=broker.url)["targetId"]
            self._session = self._call("Target.attachToTarget", targetId=target,
                                       flatten=True)["sessionId"]
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, session=None, **params):
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + BROWSER_TIMEOUT_S
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise Failure(f"chromium: {method}: {reply['error']}")
                    return reply["result"]
            ready, _, _ = select.select([self._in], [], [], max(0, deadline - time.monotonic()))
            chunk = os.read(self._in, 1 << 20) if ready else b""
            if not chunk:
                raise Failure(f"chromium did not answer {method} within {BROWSER_TIMEOUT_S} s")
            self._buf += chunk

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page; None if it threw (or the page was
        between documents)."""
        return self._call("Runtime.evaluate", self._session, returnByValue=True,
                          expression=expression)["result"].get("value")

    def dom(self):
        """What the page shows now; empty while it is still loading."""
        return Dom(self.evaluate("document.documentElement.outerHTML") or "")

    def wait_for(self, what, predicate, timeout=CLIENT_TIMEOUT_S):
        """The DOM, once predicate(dom) holds (read every 100 ms until `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            dom = self.dom()
            if predicate(dom):
                print(f"ok   the page shows {what}", flush=True)
                return dom
            if time.monotonic() >= deadline:
                raise Failure(f"the page never showed {what} within {timeout} s")
            time.sleep(0.1)

    def screenshot(self, path, down_to=None):
        """A PNG of the window, or of its top down to the bottom of the element `down_to` (a CSS
        selector) when given."""
        params = {"format": "png"}
        if down_to:
            width, height = self.evaluate(
                f"[innerWidth, Math.ceil(document.querySelector({json.dumps(down_to)})"
                ".getBoundingClientRect().bottom)]")
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        png = self._call("Page.captureScreenshot", self._session, **params)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(png))

    def close(self):
        if self.proc.poll() is None:
            try:  # no answer to wait for: the browser is gone once it acts on it
                os.write(self._out, json.dumps({"id": 0, "method": "Browser.close"}).encode() +
                         b"\0")
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for fd in (self._out, self._in):
            try:
                os.close(fd)
            except OSError:
                pass
        self._err.close()


def run(broker, workdir, rss, screenshot):
    # /api/state before anything happened: the documented shape.
    s = get_state(broker)
    validate(s, STATE)
    check_semantics(s)

    # A long-poll fetch through a real client, parked on live-0.
    m = kcat("-L", "-b", broker.bootstrap, "-t", "live")
    check(m.returncode == 0, "kcat -L created topic live")
    consumer = subprocess.Popen(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", "live", "-p", "0", "-o", "beginning", "-c",
         "1", "-q", "-u", "-X", "fetch.wait.max.ms=20000", "-X", "fetch.min.bytes=1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        s = wait_state(broker, "a fetch waiting on live-0",
                       lambda s: (fetch_key(s, "live-0") or {}).get("waiting", 0) >= 1)
        validate(s, STATE)
        check_semantics(s)
        op = fetch_key(s, "live-0")["operations"][0]
        check(op["timeout_ms"] == 20000 and 0 < op["remaining_ms"] <= 20000,
              f"its timeout is kcat's fetch.wait.max.ms=20000 ({op})")
        check(s["timer"]["tasks"] >= 1, "the timer holds its timeout")

        dom = render_page(broker, workdir)
        groups = [e for e in dom.find(**{"data-key": "live-0"})
                  if "purgatory-fetch" in e["parents"]]
        check(groups and int(groups[0]["data-waiting"]) >= 1 and "live-0" in groups[0]["text"],
              "the rendered page shows a fetch waiting on live-0 in the fetch purgatory")
        check("left" in groups[0]["text"] and "age" in groups[0]["text"],
              f"with its age and time left ({groups[0]['text'].strip()!r})")
        timer = dom.find(id="timer")
        check(timer and int(timer[0]["data-tasks"]) >= 1, "the page shows the wheel's task count")
        levels = [e for e in dom.elements if "data-level" in e and e["tag"] == "div"]
        check(levels and sum(int(e["data-tasks"]) for e in levels) == int(timer[0]["data-tasks"]),
              f"and its tasks per level ({[(e['data-level'], e['data-tasks']) for e in levels]})")
        rings = [e for e in dom.elements if e["tag"] == "path" and "data-bucket" in e]
        check(len(rings) >= 2 * s["timer"]["wheel_size"], f"and the buckets ({len(rings)} drawn)")

        # kcat produces: the fetch completes early.
        p = kcat("-P", "-b", broker.bootstrap, "-t", "live", "-p", "0", input_text="wake up\n")
        check(p.returncode == 0, "kcat -P produced one record")
        out, _ = consumer.communicate(timeout=CLIENT_TIMEOUT_S)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    check(out.strip() == "wake up", "the long-polling consumer got the record")

    # A fetch on an empty partition that expires.
    kcat("-L", "-b", broker.bootstrap, "-t", "live-quiet")
    e = kcat("-C", "-b", broker.bootstrap, "-t", "live-quiet", "-p", "0", "-o", "beginning", "-e",
             "-q", "-X", "fetch.wait.max.ms=300")
    check(e.returncode == 0 and e.stdout == "", "kcat's fetch on an empty partition expired")
    s = wait_state(broker, "both outcomes", lambda s: {"completed early", "expired"} <= {
        o["outcome"] for o in s["outcomes"]})
    validate(s, STATE)
    check_semantics(s)
    early = [o for o in s["outcomes"] if o["key"] == "live-0" and o["outcome"] == "completed early"]
    check(early and early[0]["waited_ms"] < 19000 and "min_bytes reached" in early[0]["why"],
          f"/api/state: {early and early[0]['text']}")

    dom = render_page(broker, workdir)
    shown = dom.find(**{"data-outcome": "completed early", "data-key": "live-0"})
    check(shown and re.search(r"fetch on live-0 completed early after \d+ ms \(min_bytes reached",
                              shown[0]["text"]),
          f"the page shows the early completion ({shown and shown[0]['text']!r})")
    expired = dom.find(**{"data-outcome": "expired", "data-key": "live-quiet-0"})
    check(expired and "expired after" in expired[0]["text"],
          f"and the expiry ({expired and expired[0]['text']!r})")
    check(not [e for e in dom.find(**{"data-key": "live-0"}) if "purgatory-fetch" in e["parents"]],
          "and the fetch no longer waits")

    # The controls: bad input named, good input parked and completed through the purgatories.
    status, text = post(broker, "api/fetch", topic="live", min_bytes="lots")
    check(status == 400 and "min_bytes" in text, f"a bad min_bytes answers 400 naming it ({text!r})")
    status, text = post(broker, "api/produce", topic="no spaces", count=1)
    check(status == 400 and "topic" in text, f"a bad topic answers 400 naming it ({text!r})")
    status, text = post(broker, "api/replication-delay", follower=9, delay_ms=5)
    check(status == 400 and "follower" in text, f"a bad follower answers 400 naming it ({text!r})")
    status, text = post(broker, "api/fetch", topic="live-ui", min_bytes=500, max_wait_ms=30000)
    check(status == 200, f"the page's long-poll fetch started ({status} {text})")
    wait_state(broker, "the page's fetch on live-ui-0", lambda s: fetch_key(s, "live-ui-0"))
    status, text = post(broker, "api/produce", topic="live-ui", count=10, value_bytes=100)
    check(status == 200, f"the page's produce went in ({status} {text})")
    s = wait_state(broker, "the page's fetch completing early", lambda s: any(
        o["key"] == "live-ui-0" and o["outcome"] == "completed early" for o in s["outcomes"]))
    # The demo button: plays the scenarios against this broker, one run at a time (the broker
    # is stopped while they play: that must still be a clean exit).
    status, text = post(broker, "api/demo")
    check(status == 200, f"the demo button started the scenarios ({status} {text})")
    status, text = post(broker, "api/demo")
    check(status == 409 and "already playing" in text, f"a second press answers 409 ({text!r})")
    s = wait_state(broker, "a demo fetch on early-0", lambda s: fetch_key(s, "early-0"))
    check(s["broker"]["demo_running"], "/api/state says the demo is playing")
    check(s["broker"]["replication_delays_ms"][:2] == [100, 400],
          f"with the demo's followers ({s['broker']['replication_delays_ms']})")

    if rss:
        for _ in range(300):
            get_state(broker)
        before = rss_kib(broker.proc.pid)
        for i in range(1500):
            get_state(broker, since=i % 7)
        after = rss_kib(broker.proc.pid)
        check(after - before < 2048, f"1500 polls grew RSS by < 2 MiB ({before} -> {after} KiB)")
    if screenshot:
        render_page(broker, workdir, screenshot=screenshot)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", required=True, help="path to the demo_broker binary")
    parser.add_argument("--rss", action="store_true", help="also check memory stays flat")
    parser.add_argument("--screenshot", help="also save a screenshot of the page there")
    args = parser.parse_args()
    for tool in ("kcat", CHROMIUM):
        if shutil.which(tool) is None:
            raise Failure(f"{tool} is not installed (scripts/packages.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="demo_broker_ui_") as workdir:
        run_case(BrokerProcess(args.broker, workdir, ui=True),
                 lambda b: run(b, workdir, args.rss, args.screenshot))
    print("live view e2e: every check passed")
    return 0


if __name__ == "__main__":
    exit_with(main)

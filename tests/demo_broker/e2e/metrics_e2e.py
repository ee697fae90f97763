#!/usr/bin/python3
"""End-to-end test of demo_broker's Prometheus endpoint (--metrics).

Starts `demo_broker --listen 127.0.0.1:0 --metrics 127.0.0.1:0`, scrapes GET /metrics (once with
`curl -s`, as a person would), checks every line with a strict parser of the text exposition
format 0.0.4, then makes the purgatories work with kcat (a fetch that expires empty, one that
completes early, an acks=-1 produce) and scrapes again: the counters moved, the histogram grew.
Also 404 for another path and 405 for another method. Stops the broker by its PID (SIGTERM) and
requires a clean exit.

    /usr/bin/python3 metrics_e2e.py --broker build/.../demo_broker
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_e2e import kcat  # noqa: E402
from broker_process import (  # noqa: E402
    CLIENT_TIMEOUT_S, BrokerProcess, Failure, check, exit_with, run_case)

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
SAMPLE = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)"
                    r"(?: (?P<ts>-?[0-9]+))?\Z")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_value(text, line):
    if text in ("+Inf", "-Inf", "NaN"):
        return float(text.replace("Inf", "inf"))
    if not re.fullmatch(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", text):
        raise Failure(f"not a float: {text!r} in {line!r}")
    return float(text)


def parse_labels(text, line):
    labels, pos = {}, 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        if not m:
            raise Failure(f"bad label syntax at {text[pos:]!r} in {line!r}")
        if m.group(1) in labels:
            raise Failure(f"label {m.group(1)} twice in {line!r}")
        labels[m.group(1)] = m.group(2)
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise Failure(f"expected ',' between labels in {line!r}")
            pos += 1
    return labels


def family_of(name, types):
    """The family a sample belongs to: itself, or a histogram/summary's base name."""
    if name in types:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[:-len(suffix)]
        if name.endswith(suffix) and types.get(base) in ("histogram", "summary"):
            return base
    return None


def parse_exposition(text):
    """Strict parse of the text format. Returns {(name, frozenset(labels)): value} and types."""
    check(text.endswith("\n"), "the exposition ends with a newline")
    helps, types, samples, seen_samples_of = {}, {}, {}, set()
    for line in text[:-1].split("\n"):
        if line == "":
            raise Failure("empty line in the exposition")
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME.match(name):
                    raise Failure(f"bad metric name in {line!r}")
                if name in seen_samples_of:
                    raise Failure(f"{parts[1]} for {name} after its samples")
                if parts[1] == "HELP":
                    if name in helps or len(parts) < 4 or not parts[3]:
                        raise Failure(f"duplicate or empty HELP: {line!r}")
                    helps[name] = parts[3]
                else:
                    if name in types or len(parts) != 4 or parts[3] not in TYPES:
                        raise Failure(f"duplicate or bad TYPE: {line!r}")
                    types[name] = parts[3]
            continue
        m = SAMPLE.match(line)
        if not m:
            raise Failure(f"not a sample line: {line!r}")
        name = m.group("name")
        family = family_of(name, types)
        if family is None or family not in helps:
            raise Failure(f"sample {name} without HELP and TYPE before it")
        seen_samples_of.add(family)
        labels = parse_labels(m.group("labels") or "", line)
        for label in labels:
            if not LABEL_NAME.match(label) or label.startswith("__"):
                raise Failure(f"bad label name {label} in {line!r}")
        value = parse_value(m.group("value"), line)
        if types[family] == "counter" and not name.endswith("_total"):
            raise Failure(f"counter {name} is not named *_total")
        if types[family] in ("counter",) or name.endswith(("_bucket", "_count")):
            if value < 0 or math.isnan(value):
                raise Failure(f"negative or NaN count in {line!r}")
        key = (name, frozenset(labels.items()))
        if key in samples:
            raise Failure(f"duplicate sample {line!r}")
        samples[key] = value
    for family, kind in types.items():
        if family not in seen_samples_of:
            raise Failure(f"family {family} has no sample")
        if kind == "histogram":
            check_histogram(family, samples)
    return samples, types


def check_histogram(family, samples):
    series = {}
    for (name, labels), value in samples.items():
        if name == f"{family}_bucket":
            rest = frozenset(kv for kv in labels if kv[0] != "le")
            le = dict(labels).get("le")
            if le is None:
                raise Failure(f"{family}_bucket without le")
            series.setdefault(rest, []).append((parse_value(le, le), value))
    if not series:
        raise Failure(f"histogram {family} has no buckets")
    for rest, buckets in series.items():
        buckets.sort()
        if buckets[-1][0] != math.inf:
            raise Failure(f"{family}{dict(rest)} does not end with le=\"+Inf\"")
        counts = [c for _, c in buckets]
        if any(b < a for a, b in zip(counts, counts[1:])):
            raise Failure(f"{family}{dict(rest)} buckets are not cumulative: {counts}")
        count = samples.get((f"{family}_count", rest))
        total = samples.get((f"{family}_sum", rest))
        if count is None or total is None:
            raise Failure(f"{family}{dict(rest)} lacks _count or _sum")
        if counts[-1] != count:
            raise Failure(f"{family}{dict(rest)}: +Inf bucket {counts[-1]} != _count {count}")
        if total < 0:
            raise Failure(f"{family}{dict(rest)}: negative _sum")


def value(samples, name, **labels):
    key = (name, frozenset(labels.items()))
    if key not in samples:
        raise Failure(f"no sample {name}{labels}")
    return samples[key]


def scrape(url):
    with urllib.request.urlopen(url, timeout=CLIENT_TIMEOUT_S) as r:
        check(r.status == 200, f"GET {url} answered 200")
        ctype = r.headers.get("Content-Type", "")
        check(ctype.startswith("text/plain; version=0.0.4"), f"Content-Type is {ctype!r}")
        return parse_exposition(r.read().decode("utf-8"))


def http_status(url, method="GET"):
    req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT_S) as r:
            return r.status, r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.headers


def run(broker):
    c = subprocess.run(["curl", "-s", "--max-time", str(CLIENT_TIMEOUT_S), broker.metrics_url],
                       capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S + 5)
    check(c.returncode == 0, f"curl -s {broker.metrics_url} exited 0 (rc {c.returncode})")
    first, types = parse_exposition(c.stdout)
    check(len(first) > 0, f"curl's scrape parsed strictly: {len(first)} samples, "
                          f"{len(types)} families")
    for family, kind in [("purgatory_watched_keys", "gauge"),
                         ("purgatory_delayed_operations", "gauge"),
                         ("purgatory_operations_completed_total", "counter"),
                         ("purgatory_operations_expired_total", "counter"),
                         ("purgatory_wait_duration_seconds", "histogram"),
                         ("purgatory_timer_pending_tasks", "gauge")]:
        check(types.get(family) == kind, f"{family} is a {kind}")
    value(first, "purgatory_timer_pending_tasks", level="0")
    before, _ = scrape(broker.metrics_url)

    # A fetch that expires empty after max_wait_ms, on a topic that exists but holds nothing.
    m = kcat("-L", "-b", broker.bootstrap, "-t", "metrics-empty")
    check(m.returncode == 0, "kcat -L created topic metrics-empty")
    e = kcat("-C", "-b", broker.bootstrap, "-t", "metrics-empty", "-p", "0", "-o", "beginning",
             "-e", "-q", "-X", "fetch.wait.max.ms=300")
    check(e.returncode == 0 and e.stdout == "", "kcat's fetch on an empty partition expired")
    # A long-poll fetch that a produce completes early; the produce (acks=-1) waits for the
    # followers in the produce purgatory.
    consumer = subprocess.Popen(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", "metrics-early", "-p", "0", "-o",
         "beginning", "-c", "1", "-q", "-u", "-X", "fetch.wait.max.ms=5000", "-X",
         "fetch.min.bytes=1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline:  # until its fetch is parked
            parked = scrape(broker.metrics_url)[0]
            if value(parked, "purgatory_delayed_operations", purgatory="fetch") >= 1:
                break
            time.sleep(0.1)
        check(value(parked, "purgatory_watched_keys", purgatory="fetch") >= 1,
              "while the consumer long-polls, its fetch is watched and delayed")
        p = kcat("-P", "-b", broker.bootstrap, "-t", "metrics-early", "-p", "0", "-X", "acks=-1",
                 input_text="wake up\n")
        check(p.returncode == 0, "kcat -P (acks=-1) produced one record")
        out, _ = consumer.communicate(timeout=CLIENT_TIMEOUT_S)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    check(out.strip() == "wake up", "the long-polling consumer got the record early")

    after, _ = scrape(broker.metrics_url)
    for name, purgatory in [("purgatory_operations_expired_total", "fetch"),
                            ("purgatory_operations_completed_total", "fetch"),
                            ("purgatory_operations_completed_total", "produce"),
                            ("purgatory_wait_duration_seconds_count", "fetch"),
                            ("purgatory_wait_duration_seconds_count", "produce")]:
        b, a = value(before, name, purgatory=purgatory), value(after, name, purgatory=purgatory)
        check(a > b, f'{name}{{purgatory="{purgatory}"}} moved: {b:g} -> {a:g}')
    sum_b = value(before, "purgatory_wait_duration_seconds_sum", purgatory="fetch")
    sum_a = value(after, "purgatory_wait_duration_seconds_sum", purgatory="fetch")
    check(sum_a - sum_b >= 0.3, f"fetch wait _sum grew by the expiry's 0.3 s at least "
                                f"({sum_b:g} -> {sum_a:g})")
    for name in ("demo_broker_requests_total", "demo_broker_connections_accepted_total"):
        check(value(after, name) > value(before, name), f"{name} moved")

    base = broker.metrics_url.rsplit("/", 1)[0]
    status, _ = http_status(base + "/nope")
    check(status == 404, f"GET /nope answered 404 ({status})")
    status, headers = http_status(broker.metrics_url, "POST")
    check(status == 405 and headers.get("Allow") == "GET",
          f"POST /metrics answered 405 with Allow: GET ({status})")
    scrape(broker.metrics_url)  # still serving after those


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", required=True, help="path to the demo_broker binary")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="demo_broker_metrics_") as workdir:
        run_case(BrokerProcess(args.broker, workdir, metrics=True), run)
    return 0


if __name__ == "__main__":
    exit_with(main)

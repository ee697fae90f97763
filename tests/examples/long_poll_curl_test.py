#!/usr/bin/python3
"""examples/long_poll_server driven by curl, as a user would: a wait completed early by a publish
(with percent-decoded values), a wait that times out, a wait withdrawn when its curl is killed (the
server's counters and log say so), two waits in sequence on one kept-alive connection (curl reports
no new connection for the second), bad requests answered 400 with a reason (404 and 405 too), and a
clean stop on SIGTERM (a parked wait answered "shutting down"). Loopback only; every process it starts is stopped by this script, and the
whole run is bounded in time.
Usage: long_poll_curl_test.py <long_poll_server binary>. Exit status 77 (skipped) when the binary
was built without co_await support."""
import shutil
import signal
import subprocess
import sys
import threading
import time

from example_checks import check, report  # tests/examples/example_checks.py
from polling import eventually  # tests/examples/polling.py

SERVER = sys.argv[1]
CURL = shutil.which("curl")
if CURL is None:
    sys.exit("curl is not installed (apt-get install curl)")

server = subprocess.Popen([SERVER], stdout=subprocess.PIPE, text=True)
first = server.stdout.readline()
if "listening on" not in first:  # built without co_await support: it says so and exits 77
    status = server.wait(timeout=10)
    print(first, end="")
    sys.exit(77 if status == 77 else f"{SERVER} exited {status} without listening")
PORT = int(first.rsplit(":", 1)[1])
BASE = f"http://127.0.0.1:{PORT}"

log = [first.rstrip("\n")]
log_lock = threading.Lock()


def read_log():
    for line in server.stdout:
        with log_lock:
            log.append(line.rstrip("\n"))


threading.Thread(target=read_log, daemon=True).start()
started = []  # curl processes started in the background, stopped at the end


def curl_args(*args):
    return [CURL, "-sS", "--noproxy", "*", "--max-time", "20", *args]


def curl(*args):
    """Runs curl to the end; returns its standard output."""
    return subprocess.run(curl_args(*args), capture_output=True, text=True, timeout=30).stdout


def curl_in_background(*args):
    p = subprocess.Popen(curl_args(*args), stdout=subprocess.PIPE, text=True)
    started.append(p)
    return p


def stats():
    return {name: int(value) for name, value in
            (line.split() for line in curl(f"{BASE}/stats").splitlines())}


def logged(text):
    with log_lock:
        return any(text in line for line in log)


try:
    # 1. A wait completed early: parked with a 20 s timeout, answered by a publish at once. The
    #    published value is percent-decoded ('+' is a space, %21 is '!', %26 is '&').
    start = time.monotonic()
    waiting = curl_in_background("-w", "|%{http_code}", f"{BASE}/wait?key=news&timeout_ms=20000")
    parked = eventually(lambda: stats()["waiting"] == 1)
    published = curl("-X", "POST", f"{BASE}/publish?key=news&value=hello+world%21%20%26co")
    body = waiting.communicate(timeout=15)[0]
    took = time.monotonic() - start
    check(parked and published == "1" and body == "hello world! &co|200" and took < 10,
          f"GET /wait?key=news answered {body!r} {took:.2f} s after it was sent, completed early "
          f"by POST /publish (which answered {published!r}: one wait completed)")

    # 2. A wait that times out: nobody publishes on "quiet".
    start = time.monotonic()
    body = curl("-w", "|%{http_code}", f"{BASE}/wait?key=quiet&timeout_ms=300")
    took = time.monotonic() - start
    check(body == "timeout|200" and took >= 0.3,
          f"GET /wait?key=quiet&timeout_ms=300 answered {body!r} after {took:.2f} s")

    # 3. A wait withdrawn: its curl is killed while it is parked (30 s timeout); the server
    #    withdraws the operation from the purgatory at once.
    victim = curl_in_background(f"{BASE}/wait?key=gone&timeout_ms=30000")
    parked = eventually(lambda: stats()["waiting"] == 1)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    start = time.monotonic()
    withdrawn = eventually(lambda: stats()["withdrawn"] == 1 and stats()["waiting"] == 0)
    took = time.monotonic() - start
    check(parked and withdrawn and logged("wait key=gone: cancelled"),
          f"killing the curl parked on key=gone withdrew its wait {took:.2f} s later "
          "(stats: withdrawn 1, waiting 0; log: 'wait key=gone: cancelled ...')")

    # 4. Two waits in sequence on one kept-alive connection: curl reuses it for the second URL
    #    (num_connects 0), and the server accepted one connection for both.
    before = stats()["connections"]
    body = curl("-w", "|%{num_connects}\n", f"{BASE}/wait?key=ka1&timeout_ms=100",
                f"{BASE}/wait?key=ka2&timeout_ms=100")
    accepted = stats()["connections"] - before - 1  # minus the /stats call's own connection
    check(body == "timeout|1\ntimeout|0\n" and accepted == 1,
          f"two waits on one connection: curl printed {body!r} (connections made per request: 1, "
          f"then 0); the server accepted {accepted} connection for both")

    # 5. Bad requests: 400 with a body naming the problem; 404 and 405.
    for target, method, code, reason in [
        ("/wait?key=a&timeout_ms=abc", "GET", "400",
         "timeout_ms 'abc' is not a whole number of milliseconds in [0, 60000]"),
        ("/wait?key=a&timeout_ms=60001", "GET", "400", "timeout_ms '60001' is not a whole number"),
        ("/wait?key=a&timeout_ms=%zz", "GET", "400",
         "bad %-escape in the query parameter 'timeout_ms=%zz'"),
        ("/wait?timeout_ms=5", "GET", "400", "the query parameter 'key' is required"),
        ("/wait?key=a&key=b&timeout_ms=5", "GET", "400", "query parameter 'key' given twice"),
        ("/wait?key=a&timeout_ms=5&colour=red", "GET", "400", "unknown query parameter 'colour'"),
        ("/nowhere", "GET", "404", "no such endpoint: /nowhere"),
        ("/publish?key=a&value=b", "GET", "405", "use POST for /publish"),
    ]:
        body = curl("-X", method, "-w", "|%{http_code}", f"{BASE}{target}")
        check(body.endswith(f"\n|{code}") and reason in body,
              f"{method} {target} answered {code}: {body.split(chr(10))[0]!r}")

    final = stats()
    check(final["completed"] == 1 and final["expired"] == 3 and final["withdrawn"] == 1
          and final["waiting"] == 0 and final["bad_requests"] == 6,
          f"counters: {final}")

    # 6. SIGTERM with a wait parked: it is answered "shutting down" (503), the server stops with
    #    exit status 0, and its last line holds the counters.
    parked_at_stop = curl_in_background("-w", "|%{http_code}", f"{BASE}/wait?key=late&timeout_ms=30000")
    parked = eventually(lambda: stats()["waiting"] == 1)
    server.send_signal(signal.SIGTERM)
    body = parked_at_stop.communicate(timeout=15)[0]
    status = server.wait(timeout=10)
    time.sleep(0.1)  # the log reader takes the last lines
    with log_lock:
        last = log[-1]
    check(parked and body == "shutting down\n|503",
          f"a wait parked at SIGTERM answered {body!r}")
    check(status == 0 and "stopped:" in last and "withdrawn 1 shut_down 1" in last,
          f"SIGTERM: exit status {status}, last line {last!r}")
finally:
    for p in started + [server]:
        if p.poll() is None:
            p.kill()
            p.wait()

report(log, "long_poll_server driven by curl")

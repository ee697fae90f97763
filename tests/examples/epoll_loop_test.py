#!/usr/bin/python3
"""examples/epoll_loop driven over loopback sockets, as a client of its line protocol would: waits
completed by a SET (each answered once, with the value), waits that expire (never before their
timeout, and the loop sleeps meanwhile), clients that hang up mid-wait (the server withdraws their
waits: STATS says cancelled, and a later SET completes none), bad lines answered ERR on a
connection that goes on serving, 20,000 pipelined lines answered in order, and SIGTERM with waits
parked (each answered SHUTTING_DOWN, exit status 0). Each case counts its answers: after the answers it expects, a STATS on the same
connection must come next, so no extra answer hides behind them. Loopback only; the server is
stopped by this script, every socket has a timeout and the run is bounded in time.
Usage: epoll_loop_test.py <epoll_loop binary>."""
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from polling import eventually  # tests/examples/polling.py

SERVER = sys.argv[1]
server = subprocess.Popen([SERVER], stdout=subprocess.PIPE, text=True)
failures = []


def check(ok, what):
    print(f"  [{'ok' if ok else 'FAILED'}] {what}", flush=True)
    if not ok:
        failures.append(what)


class Client:
    """One connection; lines in, lines out."""

    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        self.buffer = b""

    def send(self, text):
        self.sock.sendall(text.encode() if isinstance(text, str) else text)

    def line(self):
        """The next answer line; '<closed>' if the server closed, '<timeout>' after 10 s."""
        while b"\n" not in self.buffer:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                return "<timeout>"
            if not data:
                return "<closed>"
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def ask(self, text):
        self.send(text + "\n")
        return self.line()

    def next_is_stats(self):
        """True when the next answer is STATS' own: no answer came before it but those read."""
        return self.ask("STATS").startswith("STATS ")

    def close(self):
        self.sock.close()


def stats(client):
    words = client.ask("STATS").split()
    return {words[i]: int(words[i + 1]) for i in range(1, len(words) - 1, 2)}


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


try:
    first = server.stdout.readline()
    check(first.startswith("listening on 127.0.0.1:"), f"first line {first!r}")
    PORT = int(first.rsplit(":", 1)[1])
    admin = Client()  # asks STATS between the cases

    # 1. Waits completed by a SET: 50 clients parked on "news" (20 s timeout) and one on "other";
    #    a SET on "news" completes exactly the 50, each with the value (spaces kept), at once.
    waiters = [Client() for _ in range(50)]
    for w in waiters:
        w.send("WAIT news 20000\n")
    bystander = Client()
    bystander.send("WAIT other 20000\n")
    parked = eventually(lambda: stats(admin)["waiting"] == 51)
    start = time.monotonic()
    setter = Client()
    ok = setter.ask("SET news hello world")
    answers = [w.line() for w in waiters]
    took = time.monotonic() - start
    once = all(w.next_is_stats() for w in waiters)
    check(parked and ok == "OK 50" and answers == ["VALUE hello world"] * 50
          and once and took < 5,
          f"SET news answered {ok!r}; the 50 waits on news each answered 'VALUE hello world' "
          f"once, {took:.2f} s after the SET ({answers.count('VALUE hello world')} of 50)")
    check(setter.ask("SET other x") == "OK 1" and bystander.line() == "VALUE x"
          and bystander.next_is_stats() and setter.next_is_stats(),
          "the wait on 'other' was left by SET news and completed by SET other (OK 1)")
    for c in waiters + [bystander, setter]:
        c.close()

    # 2. Waits that expire: each answers EXPIRED once, never before its timeout (measured from
    #    before the WAIT was sent), and the server uses almost no CPU while they are parked.
    pid_cpu = cpu_seconds(server.pid)
    timed = [(Client(), ms) for ms in (0, 100, 300, 1000)]
    start = time.monotonic()
    for c, ms in timed:
        c.send(f"WAIT quiet{ms} {ms}\n")
    for c, ms in timed:
        answer = c.line()
        waited = time.monotonic() - start
        check(answer == "EXPIRED" and waited >= ms / 1000 and c.next_is_stats(),
              f"WAIT quiet{ms} {ms} answered {answer!r} once, {waited * 1000:.0f} ms after it "
              f"was sent (never before {ms} ms)")
    wall = time.monotonic() - start
    cpu = cpu_seconds(server.pid) - pid_cpu
    check(cpu < 0.25 * wall,
          f"the server used {cpu:.2f} s of CPU over the {wall:.2f} s the waits were parked "
          "(it sleeps in epoll_wait until the timer's next deadline; a busy loop would use it all)")
    for c, _ in timed:
        c.close()

    # 3. Clients that hang up mid-wait (30 s timeouts): one closes, one resets (RST), one has
    #    lines pipelined behind its WAIT. Each wait is withdrawn long before its timeout: waiting
    #    back to 0, cancelled up by 3, and a later SET on their key completes none.
    before = stats(admin)
    gone = [Client() for _ in range(3)]
    for c in gone:
        c.send("WAIT gone 30000\n")
    gone[2].send("STATS\nSET gone x\n")
    parked = eventually(lambda: stats(admin)["waiting"] == 3)
    start = time.monotonic()
    gone[0].close()
    gone[1].sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    gone[1].close()
    gone[2].sock.shutdown(socket.SHUT_RDWR)
    gone[2].close()
    withdrawn = eventually(lambda: stats(admin)["cancelled"] == before["cancelled"] + 3)
    took = time.monotonic() - start
    after = stats(admin)
    check(parked and withdrawn and after["waiting"] == 0 and took < 5
          and after["completed"] == before["completed"],
          f"3 clients gone mid-wait: withdrawn {took:.2f} s later (cancelled "
          f"{before['cancelled']} -> {after['cancelled']}, waiting {after['waiting']}; the SET "
          "pipelined behind one parked WAIT was never served)")
    check(admin.ask("SET gone y") == "OK 0", "a later SET on their key completes none (OK 0)")

    # 4. Bad lines: each answered ERR naming the problem; the connection keeps serving.
    bad = Client()
    for line, answer in [
        ("FETCH news", "ERR unknown command 'FETCH'"),
        ("", "ERR unknown command ''"),
        ("WAIT", "ERR usage: WAIT <key> <timeout_ms>"),
        ("WAIT news", "ERR usage: WAIT <key> <timeout_ms>"),
        ("WAIT news 10 20", "ERR usage: WAIT <key> <timeout_ms>"),
        ("WAIT news abc", "ERR timeout_ms 'abc' is not a whole number of milliseconds in [0, 60000]"),
        ("WAIT news -1", "ERR timeout_ms '-1' is not a whole number"),
        ("WAIT news 60001", "ERR timeout_ms '60001' is not a whole number"),
        ("SET news", "ERR usage: SET <key> <value>"),
        ("STATS now", "ERR usage: STATS"),
        ("x" * 3000, "ERR line longer than 1024 bytes"),
    ]:
        got = bad.ask(line)
        check(got.startswith(answer) and bad.next_is_stats(),
              f"{line[:30]!r} answered {got[:90]!r} once; the connection goes on")
    bad.send(b"y" * 2000)  # an over-long line arriving in pieces: one ERR for all of it
    time.sleep(0.05)
    bad.send(b"y" * 2000 + b"\nSTATS\r\n")
    got = bad.line()
    check(got == "ERR line longer than 1024 bytes" and bad.line().startswith("STATS ")
          and bad.next_is_stats(),
          f"a 4000-byte line sent in two pieces answered {got!r} once, then a CRLF line served")
    # Pipelining: 20,000 lines sent in one stream by a thread that never waits for answers (the
    #    server reads 4 KiB at a time, so lines arrive cut in two) get 20,000 answers, in order.
    flood = Client()
    sender = threading.Thread(target=flood.send, args=("SET flood v\nSTATS\n" * 10_000,))
    sender.start()
    answers = [flood.line() for _ in range(20_000)]
    sender.join(timeout=30)
    in_order = all(a == "OK 0" for a in answers[0::2]) and all(
        a.startswith("STATS waiting 0 ") for a in answers[1::2])
    check(in_order and flood.next_is_stats(),
          f"20,000 pipelined lines answered in order, each once "
          f"({sum(a == 'OK 0' for a in answers)} OK, "
          f"{sum(a.startswith('STATS ') for a in answers)} STATS)")
    flood.close()

    counters = stats(admin)
    check(counters["waiting"] == 0 and counters["completed"] == 51 and counters["expired"] == 4
          and counters["cancelled"] == 3, f"counters: {counters}")
    bad.close()

    # 5. SIGTERM with 20 waits parked: each answered SHUTTING_DOWN once, then its connection
    #    closed; the server exits 0 and its last line holds the counters.
    parked_at_stop = [Client() for _ in range(20)]
    for c in parked_at_stop:
        c.send("WAIT late 30000\n")
    parked = eventually(lambda: stats(admin)["waiting"] == 20)
    server.send_signal(signal.SIGTERM)
    answers = [(c.line(), c.line()) for c in parked_at_stop]
    status = server.wait(timeout=10)
    last = server.stdout.read().strip().splitlines()[-1:]
    check(parked and answers == [("SHUTTING_DOWN", "<closed>")] * 20,
          f"SIGTERM: the 20 parked waits each answered SHUTTING_DOWN once, then closed "
          f"({sum(a == ('SHUTTING_DOWN', '<closed>') for a in answers)} of 20)")
    check(status == 0 and last == ["stopped: waiting 0 completed 51 expired 4 cancelled 3 "
                                   "shut_down 20"],
          f"exit status {status}, last line {last}")
finally:
    if server.poll() is None:
        server.kill()
        server.wait()

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("epoll_loop over loopback: all checks passed")

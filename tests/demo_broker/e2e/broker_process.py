"""The demo_broker process of an end-to-end case: started, watched and stopped in one place.

BrokerProcess starts the binary on 127.0.0.1 port 0 (the broker picks a free port and prints it),
with --verbose, --metrics and --ui on port 0 too when asked, and whatever else the case passes;
waits until it has printed every "listening on" / "metrics on" / "ui on" line it was asked for;
keeps its stderr (the log) and stdout in files of the case's work folder; and stops it by its
own PID with SIGTERM (SIGKILL after STOP_TIMEOUT_S). run_case() runs a case and always stops the
broker, then requires a clean exit and no sanitizer report in the log. Timeouts are generous:
the broker may be an ASan or TSan build on a busy machine.
"""
import os
import re
import signal
import subprocess
import sys
import time

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60
CLIENT_TIMEOUT_S = 60


class Failure(Exception):
    pass


def check(ok, what):
    if not ok:
        raise Failure(what)
    print(f"ok   {what}", flush=True)


def exit_with(main):
    """A script's entry point: exits with main()'s code, or prints FAIL and exits 1 on a
    Failure."""
    try:
        sys.exit(main())
    except Failure as e:
        print(f"FAIL {e}", file=sys.stderr)
        sys.exit(1)


# What the broker prints on stdout once each endpoint listens.
LISTENING = re.compile(r"^listening on 127\.0\.0\.1:(\d+)$", re.M)
METRICS_ON = re.compile(r"^metrics on (http://127\.0\.0\.1:\d+/metrics)$", re.M)
UI_ON = re.compile(r"^ui on (http://127\.0\.0\.1:\d+/)$", re.M)


class BrokerProcess:
    """A demo_broker process on free loopback ports, stopped by its own PID.

    port, bootstrap ("127.0.0.1:PORT"), metrics_url (with metrics=True) and url (the live view's
    "http://127.0.0.1:PORT/", with ui=True) say where it listens."""

    def __init__(self, binary, workdir, extra=(), metrics=False, ui=False):
        self.log_path = os.path.join(workdir, "broker.log")
        self._stdout_path = os.path.join(workdir, "broker.stdout")
        args = [binary, "--listen", "127.0.0.1:0", "--verbose"]
        if metrics:
            args += ["--metrics", "127.0.0.1:0"]
        if ui:
            args += ["--ui", "127.0.0.1:0"]
        with open(self.log_path, "w") as log, open(self._stdout_path, "w") as out:
            self.proc = subprocess.Popen([*args, *extra], stdout=out, stderr=log,
                                         stdin=subprocess.DEVNULL)
        wanted = [LISTENING] + ([METRICS_ON] if metrics else []) + ([UI_ON] if ui else [])
        try:
            found = self._wait_for_stdout(wanted)
        except BaseException:
            self.stop()
            raise
        self.port = int(found[0].group(1))
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.metrics_url = found[1].group(1) if metrics else None
        self.url = found[-1].group(1) if ui else None

    def _wait_for_stdout(self, patterns):
        """The match of each pattern in what the broker printed, once all are there."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with open(self._stdout_path) as f:
                text = f.read()
            found = [p.search(text) for p in patterns]
            if all(found):
                return found
            if self.proc.poll() is not None:
                raise Failure(f"the broker exited ({self.proc.returncode}) before it listened "
                              f"(stdout {text!r}, log {self.log()[-2000:]!r})")
            if time.monotonic() > deadline:
                raise Failure(f"the broker did not print where it listens within "
                              f"{START_TIMEOUT_S} s (got {text!r})")
            time.sleep(0.05)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_for_log(self, pattern, timeout=CLIENT_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.log())
            if found:
                return found
            time.sleep(0.05)
        raise Failure(f"the broker log never showed /{pattern}/")

    def stop(self):
        """SIGTERM to its PID, then its exit code; SIGKILL and a Failure if it does not exit
        within STOP_TIMEOUT_S. Idempotent."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Failure(f"the broker did not stop within {STOP_TIMEOUT_S} s of SIGTERM")


def run_case(broker, run):
    """Runs run(broker); on failure prints the end of the broker's log. Whatever happens the
    broker is stopped; then it must have exited 0 on SIGTERM, with no sanitizer report in its
    log."""
    try:
        run(broker)
    except BaseException:
        broker.stop()
        print("---- broker log (last 60 lines) ----\n" +
              "\n".join(broker.log().splitlines()[-60:]), file=sys.stderr)
        raise
    rc = broker.stop()
    log = broker.log()
    check(rc == 0, f"the broker exited 0 on SIGTERM (rc {rc})")
    check("ERROR: AddressSanitizer" not in log and "WARNING: ThreadSanitizer" not in log
          and "runtime error:" not in log, "no sanitizer report in the broker's log")

"""What the examples' tests share besides polling.py: a check that prints its verdict and
remembers a failure, and the test's end. Imported from the test scripts beside it (a script's
folder is on sys.path)."""
import sys

failures = []  # what failed, in order


def check(ok, what):
    print(f"  [{'ok' if ok else 'FAILED'}] {what}", flush=True)
    if not ok:
        failures.append(what)


def report(log, what):
    """The test's end: the server's log and a failing exit if a check failed, else that all of
    `what` passed."""
    if failures:
        print("server log:\n  " + "\n  ".join(log))
        sys.exit(f"{len(failures)} check(s) failed")
    print(f"{what}: all checks passed")

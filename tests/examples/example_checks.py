"""What the examples' tests share besides polling.py: a check that prints its verdict and
remembers a failure. Imported from the test scripts beside it (a script's folder is on sys.path)."""

failures = []  # what failed, in order


def check(ok, what):
    print(f"  [{'ok' if ok else 'FAILED'}] {what}", flush=True)
    if not ok:
        failures.append(what)


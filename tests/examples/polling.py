"""What the example tests share: waiting, bounded, for a condition a server reaches by itself."""
import time


def eventually(condition, limit=10.0):
    """Whether `condition()` became true within `limit` seconds (polled every 10 ms)."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True

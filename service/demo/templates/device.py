"""The modelled accelerator the demo kernels run on.

Each kernel computes its result with NumPy, then tells the device how many bytes its
implementation really moved and how many FLOP it did; the call then lasts exactly as long as
that traffic takes on this device: ``max(bytes / BANDWIDTH, flops / PEAK_FLOPS)`` plus a launch
latency. So a commit that makes a kernel move twice the bytes makes it twice as slow on any
host, however busy, and the verdicts roofwatch reaches on this history are certain.
"""

import time

BANDWIDTH = 2.5e8  # bytes/s of the modelled memory: below any host's, so no host roof is beaten
PEAK_FLOPS = 1.0e9  # FLOP/s
LAUNCH_S = 2.0e-3  # seconds per kernel launch: long enough that a late wake-up on a busy host is small beside it


def modelled_seconds(bytes_moved: float, flops: float) -> float:
    """Seconds one call lasts on the modelled device."""
    return LAUNCH_S + max(bytes_moved / BANDWIDTH, flops / PEAK_FLOPS)


def complete(started: float, bytes_moved: float, flops: float) -> None:
    """Wait until the call begun at ``started`` (``time.perf_counter()``) has taken its modelled time."""
    deadline = started + modelled_seconds(bytes_moved, flops)
    while (left := deadline - time.perf_counter()) > 0:
        time.sleep(left)

"""How long one hand-out to the workers and back takes, by transport: loky's executor
(what es_search used before its worker loops, ``es_search/pools/loops.py``) against a
ping-pong over named pipes with worker loops that stay in place (what those loops build
on). The batching benchmark's Pendulum target (a batched generation >= 20x the
per-candidate path on 2 workers) is bound by this.

    PYTHONPATH=$PWD python benchmarks/round_trip.py [--workers 2] [--rounds 300]

Prints the median and 90th percentile, in microseconds, of one round: a 200-byte
message to every worker and an answer from each. Run it alone (``flock
/work/coord/bench.lock`` here): the figure is mostly thread and process wake-ups.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from joblib.externals.loky import get_reusable_executor

MESSAGE = b"x" * 200


def echo(data: bytes) -> bytes:
    return data


def pipe_loop(folder: str, worker: int, rounds: int) -> int:
    """A worker's loop: read a message from its inbox pipe, answer on its outbox."""
    inbox = os.open(os.path.join(folder, f"in{worker}"), os.O_RDONLY)
    outbox = os.open(os.path.join(folder, f"out{worker}"), os.O_WRONLY)
    try:
        for _ in range(rounds):
            os.write(outbox, os.read(inbox, 65536))
    finally:
        os.close(inbox)
        os.close(outbox)
    return worker


def summary(seconds: list[float]) -> str:
    us = sorted(s * 1e6 for s in seconds)
    return f"median {statistics.median(us):.0f} us, p90 {us[int(0.9 * len(us))]:.0f} us"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args(argv)
    n, warm = args.workers, 20
    executor = get_reusable_executor(max_workers=n)
    times = []
    for _ in range(warm + args.rounds):
        began = time.perf_counter()
        [f.result() for f in [executor.submit(echo, MESSAGE) for _ in range(n)]]
        times.append(time.perf_counter() - began)
    print(f"loky executor, {n} tasks a round: {summary(times[warm:])}")

    folder = tempfile.mkdtemp()
    for w in range(n):
        os.mkfifo(os.path.join(folder, f"in{w}"))
        os.mkfifo(os.path.join(folder, f"out{w}"))
    loops = [executor.submit(pipe_loop, folder, w, warm + args.rounds) for w in range(n)]
    inboxes = [os.open(os.path.join(folder, f"in{w}"), os.O_WRONLY) for w in range(n)]
    outboxes = [os.open(os.path.join(folder, f"out{w}"), os.O_RDONLY) for w in range(n)]
    times = []
    for _ in range(warm + args.rounds):
        began = time.perf_counter()
        for fd in inboxes:
            os.write(fd, MESSAGE)
        for fd in outboxes:
            os.read(fd, 65536)
        times.append(time.perf_counter() - began)
    [f.result() for f in loops]
    for fd in inboxes + outboxes:
        os.close(fd)
    print(f"named pipes, {n} persistent worker loops: {summary(times[warm:])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

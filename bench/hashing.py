"""Password hashes side by side, for the web worker's limit (accounts/hashers.py `hash_at_most`):
`python -m bench.hashing [ROUNDS]` runs as many processes as gunicorn has workers, each verifying one
argon2id hash over and over with the service's hasher, three ways in turn: one thread per process (the
login part's ceiling), two threads per process (the Procfile's `--threads 2`) with no limit, and two threads
with the limit of one hash at a time. It prints each way's CPU time per verification (the processes' own:
utime + stime) and verifications per second, one line per round and the medians. No database: the hasher
alone, at the configured parameters."""

import multiprocessing
import statistics
import sys
import threading
import time

from django.conf import settings

from bench.common import WORKERS

settings.configure()  # the hasher reads no setting; Django's hashers module wants them configured

from accounts import hashers  # noqa: E402

PASSWORD = "bench-password"
VERIFIES = 40  # per thread


def _process(threads: int, limit: int | None, encoded: str, results) -> None:
    if limit is not None:
        hashers.hash_at_most(limit)
    hasher = hashers.OwaspArgon2PasswordHasher()

    def verify() -> None:
        for _ in range(VERIFIES):
            hasher.verify(PASSWORD, encoded)

    cpu, wall = time.process_time(), time.perf_counter()
    running = [threading.Thread(target=verify) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    results.put((time.process_time() - cpu, time.perf_counter() - wall, threads * VERIFIES))


def _way(threads: int, limit: int | None, encoded: str) -> tuple[float, float]:
    """(ms of CPU per verification, verifications per second) of WORKERS processes at once."""
    results = multiprocessing.Queue()
    processes = [
        multiprocessing.Process(target=_process, args=(threads, limit, encoded, results))
        for _ in range(WORKERS)
    ]
    for process in processes:
        process.start()
    done = [results.get() for _ in processes]
    for process in processes:
        process.join()
    verifies = sum(count for _, _, count in done)
    return sum(cpu for cpu, _, _ in done) / verifies * 1000, verifies / max(wall for _, wall, _ in done)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    encoded = hashers.OwaspArgon2PasswordHasher().encode(PASSWORD, hashers.OwaspArgon2PasswordHasher().salt())
    ways = {
        "1 thread per process": (1, None),
        "2 threads per process, no limit": (2, None),
        "2 threads per process, one hash at a time": (2, 1),
    }
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for round_ in range(1, rounds + 1):  # alternating, so that drifting load hits every way alike
        for name, (threads, limit) in ways.items():
            figures[name].append(_way(threads, limit, encoded))
            cpu, rate = figures[name][-1]
            print(f"round {round_}: {name}: {cpu:.1f} ms of CPU per verification, {rate:.1f} per second")
    print(f"\n{WORKERS} processes, argon2id m={hashers.OwaspArgon2PasswordHasher.memory_cost} KiB, medians:")
    for name, runs in figures.items():
        cpu = statistics.median(cpu for cpu, _ in runs)
        rate = statistics.median(rate for _, rate in runs)
        print(f"  {name}: {cpu:.1f} ms of CPU per verification, {rate:.1f} per second")


if __name__ == "__main__":
    main()

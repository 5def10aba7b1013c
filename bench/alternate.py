#!/usr/bin/env python3
"""Whole-process wall time of commands run in turn.

    bench/alternate.py [--runs N] LABEL='COMMAND ARGS' [LABEL='...' ...]

Each round runs every command once, in the order given, so a change in the
host's speed (this benchmark runs on shared machines) reaches all of them
alike; comparing two binaries in separate series does not. A command is
spawned directly (no shell), its output discarded, and timed from spawn to
reaped exit. Leading `NAME=value` words set the environment of that
command alone. Prints the median, 25th percentile and minimum of each, in
milliseconds.

Every program named by a path is first copied, all at the same moment, to
a fresh file, and the copies are run. On a host that pages out cold page
cache (DAMON's `pageout` here), an executable written an hour ago faulted
in a third more pages at each start than a fresh copy of the same bytes
(197 against 147 for the same command) and ran 1.2-1.7 ms slower: the
older of two files would otherwise lose the comparison whatever it held.
"""

import argparse
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time


def is_assignment(word):
    return "=" in word and not word.startswith("/")


def spawn(words, devnull):
    env = dict(os.environ)
    while words and is_assignment(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    start = time.perf_counter()
    pid = os.posix_spawnp(
        words[0],
        words,
        env,
        file_actions=[
            (os.POSIX_SPAWN_DUP2, devnull, 1),
            (os.POSIX_SPAWN_DUP2, devnull, 2),
        ],
    )
    _, status, _ = os.wait4(pid, 0)
    elapsed = (time.perf_counter() - start) * 1000
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        sys.exit(f"{' '.join(words)}: killed by signal {-code}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("commands", nargs="+", metavar="LABEL=COMMAND")
    args = parser.parse_args()
    commands = []
    for spec in args.commands:
        label, sep, command = spec.partition("=")
        if not sep or not command:
            parser.error(f"`{spec}` is not LABEL=COMMAND")
        commands.append((label, shlex.split(command)))
    fresh = tempfile.TemporaryDirectory(prefix="alternate-")
    copies = {}
    for _, words in commands:
        at = next(i for i, w in enumerate(words + [""]) if not is_assignment(w))
        program = words[at] if at < len(words) else ""
        if "/" in program and os.path.isfile(program):
            if program not in copies:
                name = f"{len(copies)}-{os.path.basename(program)}"
                copies[program] = os.path.join(fresh.name, name)
                shutil.copy(program, copies[program])
            words[at] = copies[program]
    os.sync()
    devnull = os.open(os.devnull, os.O_WRONLY)
    times = {label: [] for label, _ in commands}
    for _ in range(args.runs):
        for label, words in commands:
            times[label].append(spawn(list(words), devnull))
    width = max(len(label) for label in times)
    for label, runs in times.items():
        runs.sort()
        print(
            f"{label:<{width}}  median {statistics.median(runs):6.2f}"
            f"  p25 {runs[len(runs) // 4]:6.2f}  min {runs[0]:6.2f} ms"
            f"  ({len(runs)} runs)"
        )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Interleaved rounds of `troupe bench team` for several troupe binaries.

    python3 bench/interleave.py [--mode settled|fresh|back-to-back] ROUNDS BIN...

Each round runs every binary once, in the order given, and the medians of
tasks/s are printed at the end with every round's figure.

Where a run's workspace lives matters on ext4 without a journal: the inode
allocator passes over every inode freed in the last 60 s (longer while the
inode table is not yet written back), and a bench run frees all the files
it made. The modes:

  settled       in the system's temporary directory, after `sync` and
                --gap seconds (65) without a run: no run pays for the
                inodes another freed.
  fresh         each run in a new directory at the top of the file system
                (TMPDIR=/benchXXXXXX, so / must be writable), which ext4
                places in a group of its own; removed afterwards.
  back-to-back  in the system's temporary directory, with no pause.

A binary whose `bench team` has no --wake-samples (trees before the idle
window opened after spawns) runs with --idle-teammates 1 --idle-window 1s;
the others with --idle-teammates 0 --wake-samples 0.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def team_args(binary):
    help_text = subprocess.run([binary, "bench", "team", "--help"],
                               capture_output=True, text=True).stdout
    if "--wake-samples" in help_text:
        return ["--idle-teammates", "0", "--wake-samples", "0"]
    return ["--idle-teammates", "1", "--idle-window", "1s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["settled", "fresh", "back-to-back"], default="settled")
    p.add_argument("--gap", type=float, default=65.0, help="seconds of quiet before a settled run")
    p.add_argument("rounds", type=int)
    p.add_argument("binaries", nargs="+")
    a = p.parse_args()
    extra = {b: team_args(b) for b in a.binaries}
    got = {b: [] for b in a.binaries}
    for r in range(a.rounds):
        for b in a.binaries:
            env = dict(os.environ)
            fresh = None
            if a.mode == "settled":
                subprocess.run(["sync"], check=True)
                time.sleep(a.gap)
            elif a.mode == "fresh":
                fresh = tempfile.mkdtemp(prefix="bench", dir="/")
                env["TMPDIR"] = fresh
            try:
                out = subprocess.run([b, "bench", "team", "--json"] + extra[b],
                                     capture_output=True, text=True, env=env)
            finally:
                if fresh:
                    shutil.rmtree(fresh, ignore_errors=True)
            try:
                tps = json.loads(out.stdout)["tasks_per_s"]
            except (ValueError, KeyError):
                print(f"round {r}: {b} failed: {out.stderr[-400:]}", flush=True)
                continue
            got[b].append(tps)
            try:
                load = open("/proc/loadavg").read().split()[0]
            except OSError:
                load = "?"
            print(f"round {r}: {os.path.basename(b)} {tps:.1f} tasks/s (load {load}, {time.strftime('%H:%M:%S')})", flush=True)
    for b in a.binaries:
        if got[b]:
            rounds = ", ".join(f"{x:.1f}" for x in got[b])
            print(f"{os.path.basename(b)}: median {statistics.median(got[b]):.1f} tasks/s ({rounds})")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Spawn latency, memory and idle CPU of forked teammates (issue 3's benchmark).

A real `teamd run` on a temporary root under the current directory (the ordinary disk, with
every fsync the contract asks for), the scripted model server in this process, the real
`teamctl` console script and the real `anthropic` SDK over real HTTP.

- spawn latency: from `teamctl spawn` returning to that teammate's first request reaching
  the model server (the server stamps `received_at` and reads the agent's name from its
  identity line); one spawn at a time, each on a quiet system (the previous one idle).
  Target p50 < 150 ms.
- memory: the proportional set size (PSS) of each idle teammate with all of them running.
  Target mean < 25 MB. Also teamd's PSS and RSS, and the RSS of a fresh interpreter that
  imports anthropic, for reference.
- idle CPU: teamd's CPU time over a quiet window with every teammate idle. Target < 1 % of
  one core. Also the CPU of all idle teammates together.

    python bench/bench_spawn.py [--members 20] [--idle-seconds 20] [--keep]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import fs_type, percentile  # noqa: E402
from teamd import actions, roster  # noqa: E402
from teamd.layout import Workspace  # noqa: E402
from teamd.scripted import ScriptedServer  # noqa: E402
from tests.harness import running_teamd, wait_until  # noqa: E402

TEAM = "bench"
TEAMCTL = Path(sys.executable).parent / "teamctl"
TARGET_SPAWN_P50_MS, TARGET_PSS_MB, TARGET_IDLE_CPU_PCT = 150.0, 25.0, 1.0
MB = 1024 * 1024


def status_of(ws: Workspace, name: str) -> tuple[str, bool]:
    m = roster.get(roster.load(ws, TEAM), name)
    return m["status"], roster.is_live(m)


def is_idle(ws: Workspace, name: str) -> bool:
    return status_of(ws, name) == ("idle", True)


def is_from(name: str, record: dict[str, Any]) -> bool:
    return bool(record["agent"] == name)


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def run_ns(proc: psutil.Process) -> int | None:
    """Nanoseconds on CPU from /proc/PID/schedstat (cpu_times counts 10 ms ticks only)."""
    try:
        with open(f"/proc/{proc.pid}/schedstat") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def fresh_anthropic() -> tuple[float, float]:
    """(RSS in MB, seconds) of a cold interpreter that imports anthropic."""
    code = ("import time; t = time.monotonic(); import anthropic; t = time.monotonic() - t\n"
            "rss = [l for l in open('/proc/self/status') if l.startswith('VmRSS:')][0]\n"
            "print(int(rss.split()[1]) * 1024, t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                         text=True).stdout.split()
    return int(out[0]) / MB, float(out[1])


def wait_ready(sock: socket.socket, timeout: float) -> None:
    """Block until teamd says READY=1 on its notify socket (after its first reconcile)."""
    deadline = time.monotonic() + timeout
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if b"READY=1" in sock.recv(65536):
                return
        except TimeoutError:
            raise SystemExit(f"teamd not ready within {timeout:g}s") from None


def drain(sock: socket.socket) -> None:
    sock.settimeout(None)
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass  # closed at the end


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=20)
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix=".bench-spawn-", dir=Path.cwd()))
    root = tmp / "ws"
    root.mkdir()
    ws = Workspace.at(root)
    sockdir = tempfile.mkdtemp(prefix="bsp-", dir="/tmp")  # AF_UNIX paths are short
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(os.path.join(sockdir, "notify"))
    for key in ("ANTHROPIC_API_KEY", "WATCHDOG_USEC", "WATCHDOG_PID"):
        os.environ.pop(key, None)
    os.environ["NOTIFY_SOCKET"] = os.path.join(sockdir, "notify")
    names = [f"m{i:02d}" for i in range(args.members)]
    ok = True
    try:
        with ScriptedServer({"rules": []}) as server:
            actions.create_team(ws, TEAM)
            with running_teamd(ws, server.url, idle_timeout=3600) as daemon:
                wait_ready(notify, 60)
                # keep reading STATUS= lines, so a full socket never stalls teamd's sends
                threading.Thread(target=drain, args=(notify,), daemon=True).start()
                teamd = psutil.Process(daemon.pid)

                # -- spawn latency ------------------------------------------------------
                lat: list[float] = []
                for name in names:
                    subprocess.run([str(TEAMCTL), "--root", str(root), "spawn", TEAM, name,
                                    "--prompt", f"You are {name}. Wait for instructions."],
                                   check=True, capture_output=True)
                    returned = time.time()
                    rec = server.wait_for(functools.partial(is_from, name), 30)
                    lat.append((rec["received_at"] - returned) * 1000)
                    wait_until(functools.partial(is_idle, ws, name), 30, f"{name} to go idle",
                               interval=0.005)
                p50 = percentile(lat, 50)
                print(f"spawn latency, {len(lat)} spawns, root {tmp} ({fs_type(tmp)}):")
                print(f"  p50 {p50:.1f} ms  p90 {percentile(lat, 90):.1f} ms  "
                      f"max {max(lat):.1f} ms  mean {statistics.fmean(lat):.1f} ms  "
                      f"(target p50 < {TARGET_SPAWN_P50_MS:g} ms: "
                      f"{'met' if p50 < TARGET_SPAWN_P50_MS else 'MISSED'})")
                ok &= p50 < TARGET_SPAWN_P50_MS

                # -- memory --------------------------------------------------------------
                kids = [psutil.Process(int(roster.get(roster.load(ws, TEAM), n)["pid"]))
                        for n in names]
                pss = [k.memory_full_info().pss / MB for k in kids]
                uss = [k.memory_full_info().uss / MB for k in kids]
                rss = [k.memory_info().rss / MB for k in kids]
                mine = teamd.memory_full_info()
                cold_rss, cold_s = fresh_anthropic()
                mean_pss = statistics.fmean(pss)
                print(f"memory, {len(kids)} idle teammates:")
                print(f"  teammate PSS mean {mean_pss:.1f} MB  max {max(pss):.1f} MB  "
                      f"(USS mean {statistics.fmean(uss):.1f} MB, RSS mean "
                      f"{statistics.fmean(rss):.1f} MB)  (target < {TARGET_PSS_MB:g} MB: "
                      f"{'met' if mean_pss < TARGET_PSS_MB else 'MISSED'})")
                print(f"  teamd PSS {mine.pss / MB:.1f} MB  RSS {mine.rss / MB:.1f} MB")
                print(f"  reference: a fresh `python -c 'import anthropic'` RSS "
                      f"{cold_rss:.1f} MB (the import alone took {cold_s:.2f} s)")
                ok &= mean_pss < TARGET_PSS_MB

                # -- idle CPU ------------------------------------------------------------
                t0 = time.monotonic()
                sup0, kids0 = cpu_seconds(teamd), sum(cpu_seconds(k) for k in kids)
                ns0 = run_ns(teamd)
                time.sleep(args.idle_seconds)  # the measurement window itself
                wall = time.monotonic() - t0
                sup = (cpu_seconds(teamd) - sup0) / wall * 100
                team = (sum(cpu_seconds(k) for k in kids) - kids0) / wall * 100
                ns1 = run_ns(teamd)
                fine = "" if ns0 is None or ns1 is None else \
                    f"; {(ns1 - ns0) / 1e9 / wall * 100:.4f} % by /proc/PID/schedstat"
                still = sum(status_of(ws, n) == ("idle", True) for n in names)
                print(f"idle CPU over {wall:.1f} s ({still}/{len(names)} teammates idle):")
                print(f"  teamd {sup:.3f} % of one core by cpu_times{fine}  "
                      f"(target < {TARGET_IDLE_CPU_PCT:g} %: "
                      f"{'met' if sup < TARGET_IDLE_CPU_PCT else 'MISSED'})")
                print(f"  all {len(kids)} idle teammates together {team:.3f} % of one core")
                ok &= sup < TARGET_IDLE_CPU_PCT
        return 0 if ok else 1
    finally:
        notify.close()
        shutil.rmtree(sockdir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

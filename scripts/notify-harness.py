#!/usr/bin/env python3
"""Stands in for systemd's notify protocol where no systemd runs (containers, CI sandboxes).

It binds a NOTIFY_SOCKET datagram socket, starts the command with NOTIFY_SOCKET and
WATCHDOG_USEC set, prints every message the daemon sends (READY=1, WATCHDOG=1, STOPPING=1,
STATUS=…) with its time since start, sends SIGTERM a given time after READY=1, and reports the
exit code and the time from SIGTERM to exit. The daemon's stderr is passed through, timestamped.

Usage:
  scripts/notify-harness.py [--watchdog-usec N] [--term-after SECS] [--stop-timeout SECS] -- CMD [ARG…]

Example (a pipeline step in flight at SIGTERM):
  scripts/notify-harness.py --term-after 0.3 -- target/release/memsift --database URL daemon
Exit status: 0 when the daemon sent READY=1 and STOPPING=1 and exited 0 within --stop-timeout
(systemd's TimeoutStopSec, default 30), 1 otherwise.
"""

import argparse
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--watchdog-usec", type=int, default=2_000_000, help="WATCHDOG_USEC to pass (default 2 s)")
    parser.add_argument("--term-after", type=float, default=3.0, help="seconds after READY=1 to send SIGTERM")
    parser.add_argument("--stop-timeout", type=float, default=30.0, help="SIGKILL after this many seconds (TimeoutStopSec)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the daemon's command after --")

    workdir = tempfile.mkdtemp(prefix="notify-harness-")
    socket_path = os.path.join(workdir, "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(socket_path)
    env = dict(os.environ, NOTIFY_SOCKET=socket_path, WATCHDOG_USEC=str(args.watchdog_usec))
    # JOURNAL_STREAM makes memsift log JSON, as it does under systemd.
    env.setdefault("JOURNAL_STREAM", "0:0")
    started = time.monotonic()
    daemon = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    os.set_blocking(daemon.stderr.fileno(), False)

    def stamp() -> str:
        return f"+{time.monotonic() - started:8.3f}s"

    ready_at = term_at = killed_at = None
    stderr_open = True
    seen = {"READY": 0, "WATCHDOG": 0, "STOPPING": 0}
    watchdog_times = []
    buffered = b""
    while True:
        now = time.monotonic()
        if ready_at is not None and term_at is None and now - ready_at >= args.term_after:
            daemon.send_signal(signal.SIGTERM)
            term_at = now
            print(f"{stamp()} harness: SIGTERM sent", flush=True)
        if term_at is not None and killed_at is None and now - term_at > args.stop_timeout:
            daemon.kill()
            killed_at = now
            print(f"{stamp()} harness: SIGKILL (past --stop-timeout {args.stop_timeout}s)", flush=True)
        watched = [notify, daemon.stderr] if stderr_open else [notify]
        readable, _, _ = select.select(watched, [], [], 0.05)
        if notify in readable:
            message = notify.recv(4096).decode(errors="replace")
            for line in message.splitlines():
                key = line.split("=", 1)[0]
                if key in seen:
                    seen[key] += 1
                if key == "WATCHDOG":
                    watchdog_times.append(time.monotonic())
                if key == "READY" and ready_at is None:
                    ready_at = time.monotonic()
            print(f"{stamp()} notify: {message.replace(chr(10), ' ')}", flush=True)
        if daemon.stderr in readable:
            chunk = daemon.stderr.read()
            if chunk == b"":
                stderr_open = False
            buffered += chunk or b""
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                print(f"{stamp()} stderr: {line.decode(errors='replace')}", flush=True)
        if daemon.poll() is not None and not stderr_open and notify not in readable:
            break
    exited_at = time.monotonic()
    code = daemon.returncode
    if buffered:
        print(f"{stamp()} stderr: {buffered.decode(errors='replace')}", flush=True)
    print(f"{stamp()} harness: exit code {code}", flush=True)
    if term_at is not None:
        print(f"harness: SIGTERM to exit {exited_at - term_at:.3f} s", flush=True)
    if ready_at is not None:
        print(f"harness: start to READY=1 {ready_at - started:.3f} s", flush=True)
    gaps = [later - earlier for earlier, later in zip(watchdog_times, watchdog_times[1:])]
    if gaps:
        print(f"harness: {len(watchdog_times)} WATCHDOG=1, gaps {min(gaps):.3f}-{max(gaps):.3f} s (WATCHDOG_USEC {args.watchdog_usec})")
    print(f"harness: messages {seen}", flush=True)
    notify.close()
    os.unlink(socket_path)
    os.rmdir(workdir)
    ok = code == 0 and seen["READY"] >= 1 and seen["STOPPING"] >= 1 and term_at is not None
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Probes a running memsift API while it extracts one huge message: does /healthz keep answering?

It waits for GET /healthz to answer, stores one message holding a one-word DNA sequence of
--kib KiB (closed by a boundary) for user `probe`, starts POST /v1/users/probe/extract, and polls
GET /healthz every --interval seconds until the extract call returns. It prints the extract
call's status and time, and how many polls answered and the slowest answer. Run it beside the
daemon under scripts/notify-harness.py, which reports the watchdog pings over the same time.

Usage:
  MEMSIFT_API_TOKEN=T scripts/api-probe.py --url http://127.0.0.1:8177 [--kib 1024] [--interval 0.1]

Example (the daemon with the API on, under the notify harness):
  MEMSIFT_API_TOKEN=probe scripts/notify-harness.py --watchdog-usec 1000000 --term-after 60 -- \\
      memsift --config probe.toml --database sqlite:///tmp/probe/m.db daemon &
  MEMSIFT_API_TOKEN=probe scripts/api-probe.py --url http://127.0.0.1:8199 --kib 1024
Exit status: 0 when every poll answered 200 within --slow seconds and the extract call answered
200, 1 otherwise.
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request


def call(url, method="GET", body=None, token=None, timeout=5.0):
    """Returns (status, seconds, text); status 0 when the server did not answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", f"Bearer {token}")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, time.monotonic() - started, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, time.monotonic() - started, error.read().decode()
    except (urllib.error.URLError, OSError) as error:
        return 0, time.monotonic() - started, str(error)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the API's base URL")
    parser.add_argument("--kib", type=int, default=1024, help="size of the one-word message (KiB)")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between /healthz polls")
    parser.add_argument("--slow", type=float, default=1.0, help="a poll slower than this fails the probe")
    parser.add_argument("--extract-timeout", type=float, default=1800.0, help="give up on the extract call after this")
    args = parser.parse_args()
    token = os.environ.get("MEMSIFT_API_TOKEN")
    if not token:
        parser.error("set MEMSIFT_API_TOKEN to the daemon's token")
    base = args.url.rstrip("/")

    deadline = time.monotonic() + 60
    while call(f"{base}/healthz", timeout=1)[0] != 200:
        if time.monotonic() > deadline:
            print("probe: /healthz never answered", flush=True)
            return 1
        time.sleep(0.2)

    word = ("GATTACA" * (args.kib * 1024 // 7 + 1))[: args.kib * 1024]
    message = {"conversation": "dna", "role": "user", "content": word,
               "timestamp": "2026-03-01T10:00:00Z", "boundary": True}
    status, seconds, text = call(f"{base}/v1/users/probe/messages", "POST", [message], token, timeout=60)
    print(f"probe: {args.kib} KiB one-word message stored: {status} in {seconds:.3f} s {text[:200]}", flush=True)
    if status != 200:
        return 1

    extract = {}

    def run_extract():
        extract["result"] = call(f"{base}/v1/users/probe/extract", "POST", {}, token, timeout=args.extract_timeout)

    worker = threading.Thread(target=run_extract)
    extract_started = time.monotonic()
    worker.start()
    polls = []
    while worker.is_alive():
        status, seconds, _ = call(f"{base}/healthz", timeout=args.extract_timeout)
        polls.append((status, seconds))
        time.sleep(args.interval)
    worker.join()
    status, seconds, text = extract["result"]
    print(f"probe: extract answered {status} after {time.monotonic() - extract_started:.3f} s: {text[:1000]}", flush=True)
    answered = [seconds for code, seconds in polls if code == 200]
    slowest = max((seconds for _, seconds in polls), default=0.0)
    print(
        f"probe: /healthz answered {len(answered)} of {len(polls)} polls while extract ran; slowest {slowest:.3f} s",
        flush=True,
    )
    ok = status == 200 and polls and len(answered) == len(polls) and slowest <= args.slow
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Several memsift daemons at volume on one PostgreSQL, killed with SIGKILL, the server restarted,
with searches and HTTP ingest running beside the pipeline.

Generates --users users with a realistic spread of conversations (every user one, the rest drawn
Zipf-like, so most have one or two and a few have hundreds), imports them, optionally seeds
--seed-memories memories (random vectors) over --search-users other users, then starts --daemons
`memsift daemon` processes (each with its HTTP API on a port of its own) against a fresh PostgreSQL
database and `memsift sim` (the batch lane; batch completion time and request latency are
settings), kills a random daemon every --kill-every seconds and starts it again, restarts
PostgreSQL once midway with --restart-postgres, and waits until every segment is extracted or dead.
Beside the pipeline, for --load-secs: --search-clients concurrent searches through the first two
daemons (users drawn Zipf-like over the seeded ones; a user's first search through a daemon counts
as cold), and --ingest-clients concurrent clients posting conversations to every daemon (one post
in a hundred malformed, one in fifty re-sent). After the load, how soon a memory listed through
daemon A is found by a search through daemon B (freshness).

It prints: segments per second end to end (from the daemons' start to the last segment), segments
claimed per daemon slot and the claim statements' rate and latency (each daemon's own /metrics,
scraped before it is killed and at the end), PostgreSQL connections held (most seen), database
bytes per message and per memory, peak resident memory per daemon slot, and the load figures.
Then it checks, and exits 1 on any failure: every segment extracted or dead (the dead counted by
reason), no extraction chunk applied twice, no two active memories with one key for one user, no
provider batch the simulator created that the store does not track, no claim or unfinished answer
left behind; no search error; every ingested message in the database once, nothing of a malformed
post stored, nothing added by a re-sent one.

Usage:
  scripts/scale.py [--daemons 4] [--users 10000] [--segments 20000] [--turns 4]
                   [--kill-every SECS] [--restart-postgres CMD] [--batch-latency-ms 0]
                   [--request-latency-ms 0] [--seed-memories M] [--search-users 10000]
                   [--search-clients Q] [--ingest-clients C] [--load-secs 60]
                   [--admin-url URL] [--timeout 1800] [--keep]
Example (the issue's run: four daemons, 10,000 users, 20,000 segments, a kill every 5 s, one
PostgreSQL restart):
  scripts/scale.py --kill-every 5 \\
      --restart-postgres "pg_ctlcluster --skip-systemctl-redirect 15 main restart"
Needs a release memsift (MEMSIFT_BIN, default $CARGO_TARGET_DIR/release/memsift, else
target/release/memsift), for the load options load-bench beside it (cargo build --release -p
memsift-engine --features testing --bin load-bench), and psql; creates the database
memsift_scale_<pid> through --admin-url (default postgres://postgres@127.0.0.1:5432/postgres) and
drops it at the end unless --keep. Embeddings are the hashing embedder, so the figures are the
pipeline's and the read side's, not the model's.
"""

import argparse
import collections
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

FACTS = [
    "I moved to {place} in {year}.",
    "My favourite food is {thing} from {place}.",
    "I work as a {thing} teacher in {place}.",
    "My sister {name} lives in {place}.",
    "I started learning {thing} in {year}.",
]


def word(rng):
    onsets, vowels = "bdfglmnprstv", "aeiou"
    return "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(3))


def segments_per_user(rng, users, segments):
    """Every user one segment, the rest Zipf-like: a few users get hundreds."""
    counts = [1] * users
    weights = [1.0 / (rank + 1) ** 1.1 for rank in range(users)]
    for index in rng.choices(range(users), weights=weights, k=max(0, segments - users)):
        counts[index] += 1
    return counts


def write_input(path, rng, users, segments, turns):
    """The JSONL import; returns the number of messages."""
    counts = segments_per_user(rng, users, segments)
    # A minute between turns; every user's last turn an hour before now (a turn dated in the
    # future is stored at its arrival time, with a warning).
    start = time.time() - 3600 - 60 * turns * max(counts)
    n_messages = 0
    with open(path, "w") as out:
        for user_index, count in enumerate(counts):
            user = f"u{user_index:05d}"
            for conversation in range(count):
                for turn in range(turns):
                    is_user = turn % 2 == 0
                    fact = rng.choice(FACTS).format(
                        place=word(rng).capitalize(), thing=word(rng), name=word(rng).capitalize(), year=rng.randint(1990, 2025)
                    )
                    at = start + (conversation * turns + turn) * 60
                    out.write(json.dumps({
                        "user": user,
                        "conversation": f"c{conversation}",
                        "id": f"{user}-c{conversation}-{turn}",
                        "role": "user" if is_user else "assistant",
                        "content": fact if is_user else "Noted.",
                        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)),
                        "boundary": turn + 1 == turns,
                    }) + "\n")
                    n_messages += 1
    return n_messages


def psql(url, sql):
    """One value (the first column of the first row) of `sql`, as text."""
    out = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"psql: {out.stderr.strip()}")
    return out.stdout.strip()


def config_text(sim_url, key_file, listen, claim_lease_secs):
    sections = []
    for purpose in ["extraction", "relationship", "consolidation", "consolidation_review", "refinement",
                    "entity_gc", "summary"]:
        sections.append(
            f'[llm.{purpose}_standard]\nprovider = "anthropic"\nendpoint = "{sim_url}"\nmodel = "claude-haiku-4-5"\n'
            f'api_key_file = "{key_file}"\nlane = "batch"\nmax_tokens = 8192\n')
    return (
        "[batch]\nmax_requests_per_batch = 1000\npack_max_wait_secs = 1\npoll_initial_secs = 1\npoll_max_secs = 2\n"
        "reconcile_grace_secs = 10\n\n"
        f"[extraction]\nclaim_lease_secs = {claim_lease_secs}\n\n"
        # The start-up catch-up runs every post-processing stage once; consolidation planning is
        # quadratic in a user's memories (each memory's exact nearest neighbours), so a seeded user
        # with 67,000 memories held one daemon's loop for over ten minutes. Measured apart.
        "[postprocess]\nenabled = false\n\n"
        '[embeddings]\nbackend = "hashing"\n\n'
        f'[api]\nlisten = "{listen}"\n\n'
        '[schedules]\nrun_pipeline = "* * * * * *"\nclose_idle_segments = "*/5 * * * * *"\nsweep = "*/15 * * * * *"\n\n'
        + "\n".join(sections)
    )


def resident_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape_claims(url, token):
    """The daemon's own segment-claim counters from /metrics: segments, statements, buckets."""
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
    text = urllib.request.urlopen(request, timeout=5).read().decode()
    claims = {"segments": 0, "count": 0, "sum": 0.0, "buckets": {}}
    for line in text.splitlines():
        if line.startswith("memsift_segments_claimed_total "):
            claims["segments"] = int(float(line.split()[1]))
        elif line.startswith("memsift_segment_claim_seconds_count "):
            claims["count"] = int(float(line.split()[1]))
        elif line.startswith("memsift_segment_claim_seconds_sum "):
            claims["sum"] = float(line.split()[1])
        elif line.startswith("memsift_segment_claim_seconds_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            claims["buckets"][bound] = int(float(line.split()[1]))
    return claims


def add_claims(total, claims):
    total["segments"] += claims["segments"]
    total["count"] += claims["count"]
    total["sum"] += claims["sum"]
    for bound, n in claims["buckets"].items():
        total["buckets"][bound] = total["buckets"].get(bound, 0) + n


def empty_claims():
    return {"segments": 0, "count": 0, "sum": 0.0, "buckets": {}}


def bucket_quantile(buckets, q):
    """The upper bound of the bucket holding quantile q (what a histogram can say), in ms."""
    finite = sorted((float(bound), n) for bound, n in buckets.items() if bound != "+Inf")
    total = buckets.get("+Inf", 0)
    if total == 0:
        return None
    for bound, n in finite:
        if n >= q * total:
            return bound * 1000
    return float("inf")


class Daemons:
    """K daemon slots, each with its own API port; a killed slot is started again at once. Each
    process's claim counters are scraped before it is killed and at the end, and summed per slot."""

    def __init__(self, binary, db_url, configs, work, token):
        self.binary, self.db_url, self.configs, self.work, self.token = binary, db_url, configs, work, token
        self.procs = [None] * len(configs)
        self.urls = [None] * len(configs)
        self.peak_kib = [0] * len(configs)
        self.claims = [empty_claims() for _ in configs]
        self.n_scrape_failures = 0
        for slot in range(len(configs)):
            self.start(slot)

    def start(self, slot):
        config, listen = self.configs[slot]
        log = open(os.path.join(self.work, f"daemon-{slot}.log"), "a")
        command = [self.binary, "--config", config, "--database", self.db_url, "daemon"]
        env = {**os.environ, "MEMSIFT_LOG": "warn", "MEMSIFT_API_TOKEN": self.token}
        self.procs[slot] = subprocess.Popen(command, stdout=log, stderr=log, env=env)
        self.urls[slot] = f"http://{listen}"

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        for url in self.urls:
            while True:
                try:
                    urllib.request.urlopen(f"{url}/healthz", timeout=2).read()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        sys.exit(f"daemon at {url} did not answer /healthz")
                    time.sleep(0.1)

    def scrape(self, slot):
        try:
            add_claims(self.claims[slot], scrape_claims(self.urls[slot], self.token))
        except OSError:
            self.n_scrape_failures += 1

    def kill_one(self, rng):
        slot = rng.randrange(len(self.procs))
        self.scrape(slot)
        self.procs[slot].send_signal(signal.SIGKILL)
        self.procs[slot].wait()
        self.start(slot)
        return slot

    def sample(self):
        for slot, proc in enumerate(self.procs):
            self.peak_kib[slot] = max(self.peak_kib[slot], resident_kib(proc.pid))
        return [proc.poll() for proc in self.procs]

    def stop(self):
        for slot in range(len(self.procs)):
            self.scrape(slot)
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--daemons", type=int, default=4)
    parser.add_argument("--users", type=int, default=10000)
    parser.add_argument("--segments", type=int, default=20000)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=0.0, help="seconds between kills (0: none)")
    parser.add_argument("--restart-postgres", default="", help="a shell command run once, midway")
    parser.add_argument("--batch-latency-ms", type=int, default=0, help="sim: a batch ends this long after its create")
    parser.add_argument("--request-latency-ms", type=int, default=0, help="sim: every HTTP answer waits this long")
    parser.add_argument("--seed-memories", type=int, default=0,
                        help="memories (random vectors) seeded over --search-users users before the daemons start")
    parser.add_argument("--search-users", type=int, default=10000, help="users the seeded memories are spread over")
    parser.add_argument("--search-clients", type=int, default=0, help="concurrent searches through two daemons")
    parser.add_argument("--ingest-clients", type=int, default=0, help="concurrent HTTP ingest clients")
    parser.add_argument("--load-secs", type=int, default=60, help="how long the search and ingest load runs")
    parser.add_argument("--claim-lease-secs", type=int, default=60,
                        help="[extraction] claim_lease_secs: short leases make daemons take over live claims")
    parser.add_argument("--admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--sample-secs", type=float, default=0.25)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the database and the work directory")
    args = parser.parse_args()
    if args.segments < args.users:
        parser.error("--segments must be at least --users (every user has a conversation)")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(__file__), "..", "target"))
    binary = os.environ.get("MEMSIFT_BIN", os.path.join(target, "release", "memsift"))
    if not os.access(binary, os.X_OK):
        sys.exit(f"no memsift at {binary}: build it (cargo build --release -p memsift) or set MEMSIFT_BIN")
    load_bench = os.path.join(os.path.dirname(binary), "load-bench")
    if (args.seed_memories or args.search_clients or args.ingest_clients) and not os.access(load_bench, os.X_OK):
        sys.exit(f"no load-bench at {load_bench}: build it (cargo build --release -p memsift-engine "
                 "--features testing --bin load-bench)")
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="memsift-scale-")
    database = f"memsift_scale_{os.getpid()}"
    parsed = urllib.parse.urlparse(args.admin_url)
    db_url = urllib.parse.urlunparse(parsed._replace(path=f"/{database}"))
    psql(args.admin_url, f"CREATE DATABASE {database}")
    token = "scale-" + "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(40))
    sim = daemons = None
    try:
        sim, sim_url = start_sim(binary, work, args)
        key_file = os.path.join(work, "key")
        with open(key_file, "w") as key:
            key.write("sim-key\n")
        configs = []
        for slot in range(args.daemons):
            listen = f"127.0.0.1:{free_port()}"
            config = os.path.join(work, f"memsift-{slot}.toml")
            with open(config, "w") as out:
                out.write(config_text(sim_url, key_file, listen, args.claim_lease_secs))
            configs.append((config, listen))
        memsift = [binary, "--config", configs[0][0], "--database", db_url]

        input_path = os.path.join(work, "input.jsonl")
        n_messages = write_input(input_path, rng, args.users, args.segments, args.turns)
        started = time.monotonic()
        subprocess.run(memsift + ["import", "--format", "jsonl", input_path], check=True, stdout=subprocess.DEVNULL)
        import_secs = time.monotonic() - started
        print(f"import: {n_messages} messages of {args.users} users in {args.segments} segments, "
              f"{import_secs:.1f} s ({n_messages / import_secs:.0f} messages/s, one `memsift import`)")
        if args.seed_memories:
            seeded = load_json([load_bench, "seed", "--database", db_url, "--users", str(args.search_users),
                                "--memories", str(args.seed_memories)])
            print(f"seeded: {seeded['memories']} memories over {seeded['users']} users (at most "
                  f"{seeded['most_in_one_user']} for one) in {seeded['secs']:.0f} s")

        daemons = Daemons(binary, db_url, configs, work, token)
        daemons.wait_ready()
        loads = start_loads(load_bench, daemons, token, args)
        run = watch(daemons, db_url, rng, args, loads)
        figures = finish_loads(loads, load_bench, daemons, token, args)
        daemons.stop()
        run["claims"], run["scrape_failures"] = daemons.claims, daemons.n_scrape_failures
        run["peak_kib"] = daemons.peak_kib
        daemons = None
        report(run, db_url, n_messages, args)
        failures = check(db_url, sim_url) + check_loads(figures, db_url)
    finally:
        if daemons:
            daemons.stop()
        if sim:
            sim.kill()
            sim.wait()
        if not args.keep:
            psql(args.admin_url, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept: database {db_url}, work directory {work}")
    sys.exit(1 if failures else 0)


def load_json(command, env=None):
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:2])}: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def start_loads(load_bench, daemons, token, args):
    """The search and ingest clients, as processes running beside the pipeline for --load-secs."""
    env = {**os.environ, "MEMSIFT_API_TOKEN": token}
    loads = {}
    two = ",".join(daemons.urls[:2])
    if args.search_clients:
        loads["search"] = subprocess.Popen(
            [load_bench, "search", "--urls", two, "--clients", str(args.search_clients),
             "--seconds", str(args.load_secs), "--users", str(args.search_users)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if args.ingest_clients:
        loads["ingest"] = subprocess.Popen(
            [load_bench, "ingest", "--urls", ",".join(daemons.urls), "--clients", str(args.ingest_clients),
             "--seconds", str(args.load_secs), "--turns", str(args.turns), "--bad-every", "100"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return loads


def finish_loads(loads, load_bench, daemons, token, args):
    """Each load's figures, printed raw as they come (a later failure loses none); a load that
    failed is recorded as a failure with its error rather than ending the run."""
    figures = {}
    for name, proc in loads.items():
        out, err = proc.communicate(timeout=args.load_secs + 300)
        if proc.returncode != 0:
            figures.setdefault("load_errors", []).append(f"load-bench {name}: {err.strip()[-300:]}")
            continue
        figures[name] = json.loads(out.strip().splitlines()[-1])
        print(f"load-bench {name}: {json.dumps(figures[name])}", flush=True)
    if args.search_clients and len(daemons.urls) >= 2:
        env = {**os.environ, "MEMSIFT_API_TOKEN": token}
        try:
            figures["freshness"] = load_json([load_bench, "freshness", "--write-url", daemons.urls[0],
                                              "--read-url", daemons.urls[1], "--samples", "10"], env)
            print(f"load-bench freshness: {json.dumps(figures['freshness'])}", flush=True)
        except RuntimeError as error:
            figures.setdefault("load_errors", []).append(str(error)[-300:])
    return figures


def start_sim(binary, work, args):
    faults = {"processing_latency_ms": args.batch_latency_ms}
    if args.request_latency_ms:
        faults["slow"] = {"share": 1.0, "delay_ms": args.request_latency_ms}
    plan = os.path.join(work, "faults.json")
    with open(plan, "w") as out:
        json.dump(faults, out)
    out = open(os.path.join(work, "sim.out"), "w")
    sim = subprocess.Popen([binary, "sim", "--listen", "127.0.0.1:0", "--faults", plan], stdout=out,
                           stderr=open(os.path.join(work, "sim.err"), "w"))
    for _ in range(100):
        with open(os.path.join(work, "sim.out")) as lines:
            for line in lines:
                if line.startswith("listening on "):
                    return sim, line.split("listening on ", 1)[1].strip()
        time.sleep(0.1)
    sim.kill()
    sys.exit("memsift sim did not start: " + open(os.path.join(work, "sim.err")).read()[-500:])


SAMPLE = """SELECT json_build_object(
  'done', (SELECT count(*) FROM segments WHERE status IN ('extracted', 'dead')),
  'total', (SELECT count(*) FROM segments),
  'connections', (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()))"""


def watch(daemons, db_url, rng, args, loads):
    """Samples until every segment is done and the load clients have finished (or the timeout);
    kills and restarts on schedule."""
    started = time.monotonic()
    next_kill = started + args.kill_every if args.kill_every > 0 else None
    kills, restarts, restart_secs, most_connections = 0, 0, 0.0, 0
    done = total = 0
    # Seeded memories rest on segments stored already extracted: not the daemons' work.
    done_before = int(psql(db_url, "SELECT count(*) FROM segments WHERE status IN ('extracted', 'dead')"))
    while time.monotonic() - started < args.timeout:
        daemons.sample()
        try:
            sample = json.loads(psql(db_url, SAMPLE))
        except RuntimeError:
            time.sleep(args.sample_secs)  # PostgreSQL restarting
            continue
        done, total = sample["done"], sample["total"]
        most_connections = max(most_connections, sample["connections"])
        if done == total and all(proc.poll() is not None for proc in loads.values()):
            break
        now = time.monotonic()
        if next_kill and now >= next_kill:
            daemons.kill_one(rng)
            kills += 1
            next_kill = now + args.kill_every
        if args.restart_postgres and restarts == 0 and done >= total / 2:
            began = time.monotonic()
            subprocess.run(args.restart_postgres, shell=True, check=True, stdout=subprocess.DEVNULL)
            restart_secs = time.monotonic() - began
            restarts = 1
        time.sleep(args.sample_secs)
    return {
        "secs": time.monotonic() - started, "done": done - done_before, "total": total - done_before, "kills": kills,
        "restarts": restarts, "restart_secs": restart_secs, "connections": most_connections,
    }


def report(run, db_url, n_messages, args):
    print(f"daemons: {args.daemons}; kills: {run['kills']}; PostgreSQL restarts: {run['restarts']}"
          + (f" ({run['restart_secs']:.1f} s)" if run["restarts"] else ""))
    print(f"segments: {run['done']} of {run['total']} done in {run['secs']:.1f} s: "
          f"{run['done'] / run['secs']:.1f} segments/s end to end")
    claims = run["claims"]
    n_claimed = sum(slot["segments"] for slot in claims)
    shares = ", ".join(f"slot {slot}: {100 * c['segments'] / max(1, n_claimed):.1f} %" for slot, c in enumerate(claims))
    print(f"segments claimed (the daemons' /metrics, summed over each slot's processes): {n_claimed}; "
          f"share by daemon slot: {shares}"
          + (f" ({run['scrape_failures']} scrapes failed)" if run["scrape_failures"] else ""))
    total = empty_claims()
    for slot in claims:
        add_claims(total, slot)
    if total["count"]:
        p50, p99 = bucket_quantile(total["buckets"], 0.50), bucket_quantile(total["buckets"], 0.99)
        print(f"claim statements: {total['count']} ({total['count'] / run['secs']:.1f}/s, "
              f"{n_claimed / run['secs']:.1f} segments claimed/s); latency mean "
              f"{1000 * total['sum'] / total['count']:.1f} ms, p50 <= {p50:g} ms, p99 <= {p99:g} ms "
              "(histogram bucket bounds)")
    print(f"PostgreSQL connections held, most seen: {run['connections']}")
    print("peak resident memory by slot (MB, sampled): "
          + ", ".join(f"{kib / 1024:.0f}" for kib in run["peak_kib"]))
    # The tables' own bytes (rows, indexes, TOAST): an empty database's catalog (about 7.5 MB)
    # is not the data's.
    size = int(psql(db_url, "SELECT sum(pg_total_relation_size(relid)) FROM pg_stat_user_tables"))
    n_memories = int(psql(db_url, "SELECT count(*) FROM memories"))
    n_stored = int(psql(db_url, "SELECT count(*) FROM messages"))
    print(f"database tables: {size / 1e6:.1f} MB; {size / max(n_stored, n_messages):.0f} bytes a message, "
          f"{size / max(1, n_memories):.0f} bytes a memory ({n_memories} memories, {n_stored} messages)")
    tables = psql(db_url, "SELECT string_agg(relname || ' ' || round(pg_total_relation_size(relid) / 1e6, 1) || ' MB', ', '"
                          " ORDER BY pg_total_relation_size(relid) DESC) FROM (SELECT * FROM pg_stat_user_tables"
                          " ORDER BY pg_total_relation_size(relid) DESC LIMIT 6) t")
    print(f"largest tables: {tables}")


def check_loads(figures, db_url):
    """Prints the load figures and the counts that must be zero; returns how many are not."""
    failures = 0
    for error in figures.get("load_errors", []):
        print(f"load failed: {error}")
        failures += 1
    if "search" in figures:
        search = figures["search"]
        print(f"search: {search['clients']} clients through {search['daemons']} daemons, "
              f"{search['searches_per_sec']:.0f} searches/s; warm p50/p95/p99 {search['warm']['p50_ms']:.1f}/"
              f"{search['warm']['p95_ms']:.1f}/{search['warm']['p99_ms']:.1f} ms (n={search['warm']['n']}); "
              f"cold p50/p95/p99 {search['cold']['p50_ms']:.1f}/{search['cold']['p95_ms']:.1f}/"
              f"{search['cold']['p99_ms']:.1f} ms (n={search['cold']['n']}); all p99 {search['all']['p99_ms']:.1f} ms; "
              f"errors {search['errors'] or 0}")
        failures += sum(search["errors"].values()) != 0
    if "freshness" in figures:
        fresh = figures["freshness"]
        lag = fresh["found_after_applied"]
        print(f"freshness: a memory listed through daemon A was found by a search through daemon B after "
              f"p50 {lag['p50_ms']:.1f} ms, max {lag['max_ms']:.1f} ms ({lag['n']} samples, {fresh['timed_out']} timed out; "
              f"failed tries, retried: {fresh['errors'] or 0})")
        failures += fresh["timed_out"] != 0
    if "ingest" in figures:
        ingest = figures["ingest"]
        stored = int(psql(db_url, "SELECT count(*) FROM messages WHERE external_id LIKE 'load-%'"))
        bad_stored = int(psql(db_url, "SELECT count(*) FROM messages WHERE external_id LIKE 'bad-%'"))
        print(f"ingest: {ingest['clients']} clients over {ingest['daemons']} daemons, {ingest['posts']} posts, "
              f"{ingest['messages_per_sec']:.0f} messages/s; latency p50/p95/p99 {ingest['latency']['p50_ms']:.1f}/"
              f"{ingest['latency']['p95_ms']:.1f}/{ingest['latency']['p99_ms']:.1f} ms")
        bad = {
            "ingested messages lost or doubled (answered stored vs in the database)":
                abs(stored - ingest["messages_stored"]),
            "messages a re-sent conversation added": ingest["resent_messages_added"],
            "malformed posts accepted": ingest["bad_accepted"],
            "messages of malformed posts stored": bad_stored,
            "ingest errors other than the malformed posts' 400": sum(ingest["errors"].values()),
        }
        print(f"  (answered stored {ingest['messages_stored']}, in the database {stored}; "
              f"{ingest['resent']} re-sent, {ingest['bad_refused']} malformed refused)")
        for what, n in bad.items():
            failures += n != 0
            print(f"{what}: {n}")
    return failures


def check(db_url, sim_url):
    """The counts that must be zero; prints each, returns how many are not."""
    counters = json.load(urllib.request.urlopen(f"{sim_url}/_sim/counters", timeout=10))
    tracked = int(psql(db_url, "SELECT count(*) FROM batches WHERE provider_batch_id IS NOT NULL"))
    dead = psql(db_url, "SELECT coalesce(string_agg(reason || ': ' || n, '; '), 'none') FROM "
                        "(SELECT coalesce(left(last_error, 80), '(no reason)') AS reason, count(*) AS n FROM segments "
                        "WHERE status = 'dead' GROUP BY 1) d")
    print(f"dead segments by reason: {dead}")
    bad = {
        "segments neither extracted nor dead":
            "SELECT count(*) FROM segments WHERE status NOT IN ('extracted', 'dead')",
        "dead segments without a reason": "SELECT count(*) FROM segments WHERE status = 'dead' AND last_error IS NULL",
        "extraction chunks applied twice":
            "SELECT count(*) FROM (SELECT 1 FROM llm_requests WHERE purpose = 'extraction' AND status = 'applied' "
            "GROUP BY segment_id, chunk_index HAVING count(*) > 1) t",
        "answers left unapplied": "SELECT count(*) FROM llm_requests WHERE status IN ('planned', 'submitted', 'succeeded')",
        "two active memories with one key":
            "SELECT count(*) FROM (SELECT 1 FROM memories WHERE archived_at IS NULL "
            "GROUP BY user_id, dedupe_key HAVING count(*) > 1) t",
        "claims left on segments": "SELECT count(*) FROM segments WHERE claimed_by IS NOT NULL",
        "claims left on batches": "SELECT count(*) FROM batches WHERE claimed_by IS NOT NULL AND claimed_until < now()",
    }
    failures = 0
    for what, sql in bad.items():
        n = int(psql(db_url, sql))
        failures += n != 0
        print(f"{what}: {n}")
    untracked = counters["creates"] - tracked
    failures += untracked != 0
    print(f"provider batches created but not tracked: {untracked} (sim creates {counters['creates']}, tracked {tracked})")
    return failures


if __name__ == "__main__":
    main()

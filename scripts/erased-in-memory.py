#!/usr/bin/env python3
"""How many copies of an erased user's words a running `memsift serve` still holds in memory.

Usage: scripts/erased-in-memory.py MEMSIFT_BIN PORT

Starts `memsift serve` on a fresh SQLite store under /tmp/er, posts one conversation of user
`zed` (made-up words) and one of `ana`, extracts both, searches zed's memories three times,
erases zed, asks 300 searches of ana, then counts the made-up words in every readable mapping of
the server's memory (/proc/PID/mem; run as root or as the server's user) and prints the counts.
Set MALLOC_PERTURB_ and GLIBC_TUNABLES in the environment to measure with them, as the systemd
unit sets them. Needs the MiniLM model installed; talks only to 127.0.0.1.
"""
import re, sys, json, time, subprocess, urllib.request, urllib.parse, os
bin_, port = sys.argv[1], sys.argv[2]
os.makedirs("/tmp/er", exist_ok=True)
tok = "7c0e9a4b1f3d5e2a8b6c4d0f9e1a3b5c"
db = f"/tmp/er/{port}.db"
for f in (db, db+"-wal", db+"-shm"):
    if os.path.exists(f): os.remove(f)
open(f"/tmp/er/{port}.toml","w").write(f'[api]\nlisten = "127.0.0.1:{port}"\n')
env = dict(os.environ, MEMSIFT_API_TOKEN=tok)
p = subprocess.Popen([bin_, "--config", f"/tmp/er/{port}.toml", "--database", f"sqlite://{db}", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=open(f"/tmp/er/{port}.log","w"))
base = f"http://127.0.0.1:{port}"
def call(method, path, body=None):
    req = urllib.request.Request(base+path, method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": "Bearer "+tok, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r: return json.loads(r.read() or b"null")
for _ in range(100):
    try: urllib.request.urlopen(base+"/healthz"); break
    except Exception: time.sleep(0.2)
phrase = "Quetzalburgian xylophonist Zorblaxia"
msgs = [{"conversation":"c1","role":"user","content":f"I moved to {phrase} last spring.","timestamp":"2026-03-01T10:00:00Z","boundary":True}]
call("POST","/v1/users/zed/messages",msgs)
call("POST","/v1/users/ana/messages",[{"conversation":"c1","role":"user","content":"I keep bees on my roof.","timestamp":"2026-03-01T10:00:00Z","boundary":True}])
call("POST","/v1/users/zed/extract",{})
call("POST","/v1/users/ana/extract",{})
for q in ("where did zed move", f"{phrase}", "Quetzalburgian music"):
    call("GET","/v1/users/zed/memories/search?q="+urllib.parse.quote(q))
call("DELETE","/v1/users/zed?confirm=erase")
for i in range(300):
    call("GET","/v1/users/ana/memories/search?q="+urllib.parse.quote(f"what does ana keep {i}"))
pid = p.pid
n = {}
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem","rb",0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", line)
        if "r" not in m.group(3) or "/memsift" in line or "[vvar]" in line: continue
        a, b = int(m.group(1),16), int(m.group(2),16)
        try:
            mem.seek(a); data = mem.read(b-a)
        except Exception: continue
        for word in (b"Quetzalburgian", b"Zorblaxia"):
            n[word] = n.get(word,0) + data.count(word)
p.terminate(); p.wait()
print(bin_, {k.decode(): v for k, v in n.items()})

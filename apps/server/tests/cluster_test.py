#!/usr/bin/env python3
"""tessera-kv-server shards behind twemproxy (nutcracker), started by scripts/cluster.sh, driven
through the proxy by redis-py and redis-benchmark, each shard also asked directly:

- every key written through the proxy lands on exactly one shard and reads back through it;
  keys with the same {hash tag} share a shard; MGET/MSET/DEL are split across shards, EXISTS
  is not (twemproxy 0.5.0 sends it to the first key's shard);
  commands twemproxy does not support (KEYS, MULTI, FLUSHALL, ...) close the connection;
- redis-benchmark through the proxy: every pipelined INCR counted once, on one shard;
- cluster.sh stop, then start in the same run directory (other ports): every key is back, on
  the same shard (ketama hashes the shards' names, not their addresses);
- auto_eject_hosts false (cluster.sh's default): while a shard is down (SIGKILL), requests for
  its keys answer -ERR Connection refused (the first one after the kill may fail otherwise on
  the old connection: DOWN_ERRORS), a multi-key request touching it answers that error (an
  MSET's live part is written all the same; after an MGET's error the proxy closes the
  connection), the other shards' keys are served;
  restarted, it has its data back from its append-only log (appendfsync always: every
  acknowledged write) when the server has one;
- auto_eject_hosts true: the dead shard leaves the hash ring, its keys go to the survivor (a
  write there succeeds), and when it returns its keys map back to it: the value written during
  the outage is hidden again (docs/scale-out.md, "consistency").

No timing assertions: every wait is bounded and says what it waited for. A missing tool
(nutcracker, redis-benchmark, redis-py) is a failure naming what to install, never a skip.

    cluster_test.py --server build/dev/apps/server/tessera-kv-server --venv .venv \\
                    --cluster scripts/cluster.sh
"""
import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import harness


def fail(msg):
    print("FAIL: " + msg, flush=True)
    if CLUSTER_DIR:
        dump_logs()
    sys.exit(1)


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--venv", required=True)
    p.add_argument("--cluster", default=os.path.join(here, "..", "..", "..", "scripts",
                                                     "cluster.sh"))
    return p.parse_args()


ARGS = parse_args()
CLUSTER_DIR = None

harness.use_venv(ARGS.venv)  # redis-py lives in the project's virtual environment
redis = harness.import_redis(ARGS.venv)
from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin"  # Debian puts nutcracker there
harness.require_tools({"nutcracker": "nutcracker", "redis-cli": "redis-tools",
                       "redis-benchmark": "redis-tools"})
if not os.access(ARGS.cluster, os.X_OK):
    fail(f"{ARGS.cluster} is not an executable script")

# Sanitizer builds run the server several times slower.
SLOW = any(s in ARGS.server for s in ("asan", "tsan"))
STARTUP_S = 90 if SLOW else 30
WAIT_S = 30  # the longest any bounded wait below lasts
# The proxy's timeout for a shard's reply (cluster.sh's default is 2 s). Nothing here tests it,
# and with appendfsync always every write waits for an fdatasync: on the loaded 2-core VM a
# sanitizer build's shard took over 2 s for the last of 200 pipelined INCRs, and the proxy
# answered it "-ERR Connection timed out" (and dropped its connection to the live shard).
PROXY_TIMEOUT_MS = 20000  # below the clients' socket_timeout (30 s): the proxy answers first
HAS_AOF = "appendonly" in subprocess.run([ARGS.server, "--help"], capture_output=True,
                                         text=True).stdout


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
                   "runtime error:")


def expect(got, want, what):
    if got != want:
        fail(f"{what}: got {got!r}, want {want!r}")


def cluster(*args, check=True, timeout=None):
    """Runs scripts/cluster.sh with the test's run directory; returns the CompletedProcess."""
    cmd = [ARGS.cluster, *args]
    if args[0] not in ("--help",) and "--dir" not in args and CLUSTER_DIR:
        cmd += ["--dir", CLUSTER_DIR]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout or STARTUP_S + 60)
    if check and r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return r


def dump_logs():
    for root, _, files in os.walk(CLUSTER_DIR):
        for f in files:
            if f.endswith(".log"):
                path = os.path.join(root, f)
                with open(path, errors="replace") as fh:
                    tail = fh.read()[-1500:]
                print(f"--- {path} (end)\n{tail}", flush=True)


def port_block(n):
    """A base port with base..base+n-1 all free (they are bound right after, by cluster.sh),
    below the kernel's ephemeral range, where other tests' client connections take theirs."""
    lo = 20000
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            hi = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        hi = 32768
    if hi - lo < 1000:
        lo, hi = 1024, hi
    rng = random.Random(os.getpid() ^ int(time.time()))
    for _ in range(200):
        base = rng.randrange(lo, hi - n)
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    fail(f"no {n} consecutive free ports between {lo} and {hi}")


class Cluster:
    """A cluster started by scripts/cluster.sh in the test's run directory."""

    def __init__(self, shards, *flags):
        self.shards = shards
        for attempt in range(3):
            self.port = port_block(shards + 2)
            r = cluster("start", str(shards), "--server", ARGS.server, "--port", str(self.port),
                        "--workers", "1", "--startup-s", str(STARTUP_S), "--timeout",
                        str(PROXY_TIMEOUT_MS), *flags, check=False)
            if r.returncode == 0:
                break
            if "in use" not in r.stderr or attempt == 2:
                fail(f"cluster.sh start {shards} exited {r.returncode}: {r.stderr.strip()}")
        expect(r.stdout.strip(), f"127.0.0.1:{self.port}", "cluster.sh start prints the proxy")
        self.flags = flags

    def proxy(self):
        # Through twemproxy: RESP2 and no CLIENT SETINFO (twemproxy closes the connection on
        # HELLO and CLIENT), no retries of our own (the test counts what a client sees).
        return redis.Redis(port=self.port, protocol=2, driver_info=None, socket_timeout=30,
                           retry=Retry(NoBackoff(), 0))

    def shard(self, i):
        return redis.Redis(port=self.port + 1 + i, socket_timeout=30)

    def shard_keys(self, i):
        return set(self.shard(i).keys("*"))

    def placement(self, keys):
        """Key -> the one shard that holds it (asked directly); fails on none or several."""
        held = [self.shard_keys(i) for i in range(self.shards)]
        where = {}
        for k in keys:
            on = [i for i in range(self.shards) if k in held[i]]
            if len(on) != 1:
                fail(f"key {k!r} is on shards {on}, not on exactly one")
            where[k] = on[0]
        return where

    def stop(self):
        cluster("stop")
        # The shards' stderr (sanitizer reports, leaks found at exit) is in shard-I/stdout.log.
        for i in range(self.shards):
            path = os.path.join(CLUSTER_DIR, f"shard-{i}", "stdout.log")
            with open(path, errors="replace") as f:
                out = f.read()
            for mark in SANITIZER_MARKS:
                if mark in out:
                    fail(f"shard {i} reported {mark!r}: {path}:\n{out[-3000:]}")


def wait_for(what, fn, timeout=WAIT_S):
    """Calls fn() until it returns a true value; fails with `what` after timeout seconds."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            v = fn()
            if v:
                return v
        except (redis.ResponseError, redis.ConnectionError) as e:
            last = e
        time.sleep(0.05)
    fail(f"waited {timeout} s for {what}" + (f" (last error: {last})" if last else ""))


def test_usage():
    r = cluster("--help")
    if "Usage: scripts/cluster.sh start N" not in r.stdout:
        fail("cluster.sh --help prints no usage: " + r.stdout)
    bad = [(["start"], "start needs a number"), (["start", "abc"], "'abc' is not a number"),
           (["start", "0"], "N must be 1 to 64"), (["start", "2", "--bogus"], "unknown argument"),
           (["start", "2", "--appendfsync", "sometimes"], "not always, everysec or no"),
           (["start", "2", "--port", "70000"], "is not a port"), (["frob"], "unknown command"),
           (["stop", "--shards", "2"], "is not an option of 'stop'")]
    for args, msg in bad:
        r = cluster(*args, check=False)
        if r.returncode != 2 or msg not in r.stderr:
            fail(f"cluster.sh {' '.join(args)}: exit {r.returncode}, {r.stderr.strip()!r}; "
                 f"want exit 2 and {msg!r}")
    empty = tempfile.mkdtemp(prefix="tessera-cluster-empty-")
    try:
        r = cluster("status", "--dir", empty, check=False)
        if r.returncode != 1 or "no cluster in" not in r.stderr:
            fail(f"cluster.sh status on an empty directory: {r.returncode} {r.stderr!r}")
    finally:
        shutil.rmtree(empty)


def test_placement(c):
    r = c.proxy()
    expect(r.ping(), True, "PING through the proxy")
    n = 300 if SLOW else 1000
    data = {f"key:{i}".encode(): f"value-{i}".encode() for i in range(n)}
    pipe = r.pipeline(transaction=False)
    for k, v in data.items():
        pipe.set(k, v)
    expect(pipe.execute(), [True] * n, "pipelined SETs through the proxy")
    where = c.placement(data)
    counts = [sum(1 for s in where.values() if s == i) for i in range(c.shards)]
    if min(counts) == 0:
        fail(f"a shard got none of {n} keys: {counts}")
    total = sum(c.shard(i).dbsize() for i in range(c.shards))
    expect(total, n, "keys on all shards together (DBSIZE)")
    for k, v in list(data.items())[:100]:
        expect(r.get(k), v, f"GET {k!r} through the proxy")
    keys = list(data)
    expect(r.mget(keys), [data[k] for k in keys], f"MGET of {n} keys across {c.shards} shards")
    # Hash tags: only the part in braces is hashed, so these share a shard.
    tagged = [b"{user:7}:name", b"{user:7}:email", b"{user:7}:visits", b"{user:7}"]
    for k in tagged:
        r.set(k, b"t")
    expect(len(set(c.placement(tagged).values())), 1, "keys with one hash tag on one shard")
    print(f"  {n} keys over {c.shards} shards: {counts}", flush=True)
    return data, where


def test_multikey(c, data, where):
    r = c.proxy()
    # One key per shard, so every multi-key command below is split.
    one_each = [next(k for k in data if where[k] == i) for i in range(c.shards)]
    expect(r.mset({k: b"m" for k in one_each}), True, "MSET across shards")
    expect(r.mget(one_each + [b"absent"]), [b"m"] * c.shards + [None], "MGET across shards")
    # Debian's nutcracker 0.5.0 does not split EXISTS (its notes say it does): the whole
    # command goes to the first key's shard, which holds one of these keys.
    expect(r.exists(*one_each, b"absent"), 1, "EXISTS across shards (first key's shard only)")
    for i, k in enumerate(one_each):
        expect(c.shard(i).exists(*one_each), 1, f"EXISTS of all on shard {i} directly")
    expect(r.delete(*one_each, b"absent"), c.shards, "DEL across shards")
    for i, k in enumerate(one_each):
        expect(c.shard(i).exists(k), 0, f"{k!r} deleted on its shard {i}")
        data.pop(k)
    # What twemproxy refuses: it closes the connection (no error reply).
    for req in (b"*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n", b"*1\r\n$5\r\nMULTI\r\n",
                b"*1\r\n$8\r\nFLUSHALL\r\n", b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n",
                b"*3\r\n$6\r\nRENAME\r\n$1\r\na\r\n$1\r\nb\r\n"):
        with socket.create_connection(("127.0.0.1", c.port), timeout=10) as s:
            s.sendall(req)
            try:
                got = s.recv(100)
            except ConnectionResetError:
                got = b""
            name = req.split(b"\r\n")[2].decode()
            expect(got, b"", f"twemproxy's answer to {name} (connection closed)")
    expect(r.ping(), True, "PING through the proxy after refused commands")


def test_benchmark(c):
    r = c.proxy()
    n = 2000 if SLOW else 10000
    res = subprocess.run(["redis-benchmark", "-p", str(c.port), "-t", "set,get,incr", "-n",
                          str(n), "-c", "10", "-P", "16", "--csv"], capture_output=True,
                         text=True, timeout=300)
    if res.returncode != 0:
        fail("redis-benchmark through the proxy failed: " + res.stderr[-2000:])
    for t in ("SET", "GET", "INCR"):
        if f'"{t}"' not in res.stdout:
            fail(f"redis-benchmark printed no {t} line: {res.stdout}")
    if "rror" in res.stderr:
        fail("redis-benchmark saw errors through the proxy: " + res.stderr[-2000:])
    # Without -r every request uses one key: each pipelined INCR was counted once, on one shard.
    key = b"counter:__rand_int__"
    shard = c.placement([key, b"key:__rand_int__"])[key]
    expect(c.shard(shard).get(key), str(n).encode(), "INCR count on its shard")
    expect(r.get(key), str(n).encode(), "INCR count through the proxy")
    expect(len(r.get(b"key:__rand_int__")), 3, "SET value (3 bytes) through the proxy")


def test_stop_start(c, data, where):
    """cluster.sh stop, then start in the same run directory: the shards replay their logs."""
    r = c.proxy()
    if not HAS_AOF:
        expect(sum(c.shard(i).dbsize() for i in range(c.shards)), 0, "shards without AOF")
        r.mset(data)  # what the tests below expect, written anew
        return
    for i in range(0, len(data), 500):
        keys = list(data)[i:i + 500]
        expect(r.mget(keys), [data[k] for k in keys], "keys after stop and start (AOF replay)")
    expect(c.placement(list(data)) == {k: where[k] for k in data}, True,
           "every key on the shard it was on before stop and start")


# What twemproxy answers for a request whose shard is down: "refused" when it connects anew.
# The first request after the kill may still go out on the old connection, before the proxy
# has read the shard's FIN: it then fails on that connection with "reset by peer" (the kernel
# answered the write with RST), "Broken pipe" (written after the RST), or "unknown" (the proxy
# read the FIN first: a shard that closed with a request outstanding, errno 0, which twemproxy
# 0.5.0 words as "unknown"). Which one depends on timing only.
DOWN_ERRORS = ("Connection refused", "Connection reset by peer", "Broken pipe", "unknown")


def expect_down_error(e, what):
    if str(e) not in DOWN_ERRORS:
        fail(f"{what}: got the error {str(e)!r}, want one of {DOWN_ERRORS}")


def test_shard_down(c, data, where):
    """auto_eject_hosts false: errors for the dead shard's keys, the others served."""
    r = c.proxy()
    dead = 1
    mine = [k for k in data if where[k] == dead]
    others = [k for k in data if where[k] != dead]
    # Acknowledged writes right before the kill: with appendfsync always each is on disk.
    counter = next(k for k in mine)
    pipe = r.pipeline(transaction=False)
    for _ in range(200):
        pipe.incr(b"n:" + counter)
    pipe.execute()
    # The counter's key has no tag, so it need not sit on `dead`: ask where it went.
    n_key = b"n:" + counter
    n_shard = c.placement([n_key])[n_key]
    cluster("kill", str(dead))
    for k in mine[:20]:
        try:
            r.get(k)
            fail(f"GET {k!r} of the dead shard {dead} answered")
        except redis.ResponseError as e:
            expect_down_error(e, f"GET {k!r} while its shard is down")
    for k in others[:50]:
        expect(r.get(k), data[k], f"GET {k!r} of a live shard while shard {dead} is down")
    try:
        r.mget([others[0], mine[0]])
        fail("an MGET touching the dead shard answered")
    except redis.ResponseError as e:
        expect_down_error(e, "MGET touching the dead shard")
    # twemproxy 0.5.0 sends that error and then closes the client's connection (merging the
    # MGET's replies, it finds none for the failed part and marks the connection in error:
    # redis_post_coalesce_mget). A command sent next on it is reset, or, when the client saw
    # the close first, goes out on a new connection: timing. What follows starts on a new one.
    r.connection_pool.disconnect()
    # A split MSET (or DEL) touching the dead shard answers the error, but its live part is
    # done: not atomic.
    try:
        r.mset({others[0]: b"partial", mine[0]: b"partial"})
        fail("an MSET touching the dead shard answered OK")
    except redis.ResponseError as e:
        expect_down_error(e, "MSET touching the dead shard")
    expect(c.shard(where[others[0]]).get(others[0]), b"partial",
           "the live shard's part of a failed MSET is written")
    expect(r.set(others[0], b"written-while-down"), True, "SET on a live shard")
    data[others[0]] = b"written-while-down"
    st = cluster("status", check=False)
    if st.returncode != 3 or f"shard-{dead}" not in st.stdout or "down" not in st.stdout:
        fail(f"cluster.sh status with shard {dead} killed: {st.returncode} {st.stdout!r}")

    cluster("restart", str(dead))
    if HAS_AOF:
        expect(c.shard_keys(dead) >= set(mine), True,
               f"shard {dead} restarted from its AOF has all {len(mine)} of its keys")
        for k in mine:
            expect(r.get(k), data[k], f"GET {k!r} through the proxy after the restart")
        expect(r.get(n_key), b"200", "200 acknowledged INCRs before SIGKILL, after the restart")
    else:
        # A server without an append-only log comes back empty: its keys are gone.
        expect(c.shard(dead).dbsize(), 0, f"shard {dead} restarted without AOF")
        for k in mine[:20]:
            expect(r.get(k), None, f"GET {k!r} after a restart without AOF")
        if n_shard != dead:
            expect(r.get(n_key), b"200", "INCRs on a shard that was not killed")
        print("  NOTE: this tessera-kv-server has no append-only log (its --help does not "
              "mention appendonly): recovery after SIGKILL not checked", flush=True)
    for k in others[:50]:
        expect(r.get(k), data[k], f"GET {k!r} of a live shard after the restart")
    expect(cluster("status").returncode, 0, "cluster.sh status with every shard back")


def test_auto_eject():
    """auto_eject_hosts true: the dead shard's keys move to the survivor, and back."""
    c = Cluster(2, "--auto-eject", "--retry-ms", "1000", "--appendfsync", "always")
    try:
        r = c.proxy()
        keys = [f"e:{i}".encode() for i in range(100)]
        expect(r.mset({k: b"old" for k in keys}), True, "MSET through the proxy")
        where = c.placement(keys)
        dead = 1
        k = next(k for k in keys if where[k] == dead)
        live = next(k for k in keys if where[k] != dead)
        cluster("kill", str(dead))
        # Ejected once the proxy sees the failure: the key then hashes to shard 0, which lacks
        # it. Until then, and once per retry period after, a request answers the error.
        wait_for(f"{k!r} to be served by the survivor (shard {dead} ejected)",
                 lambda: r.get(k) is None and r.get(k) is None)
        expect(r.get(live), b"old", "a live shard's key while the other is ejected")

        def set_new():
            return r.set(k, b"new")
        wait_for(f"SET {k!r} while its shard is ejected", set_new)
        expect(c.shard(0).get(k), b"new", "a write during the ejection lands on the survivor")
        cluster("restart", str(dead))
        # After server_retry_timeout the proxy tries the shard again, finds it, and the key
        # maps back to it: the write made during the outage is hidden (it stays on shard 0).
        wait_for(f"{k!r} to map back to shard {dead} after its restart",
                 lambda: r.get(k) != b"new")
        expect(r.get(k), b"old" if HAS_AOF else None,
               "the key's value after the shard's return (its own, not the outage's write)")
        expect(c.shard(0).get(k), b"new", "the outage's write left behind on the survivor")
    finally:
        c.stop()


def main():
    global CLUSTER_DIR
    CLUSTER_DIR = tempfile.mkdtemp(prefix="tessera-cluster-test-")
    print(f"run directory {CLUSTER_DIR}; server {ARGS.server}; AOF "
          f"{'yes' if HAS_AOF else 'not in this server'}", flush=True)
    t0 = time.time()
    test_usage()
    print(f"ok test_usage ({time.time() - t0:.1f} s)", flush=True)
    # appendfsync everysec (cluster.sh's default) while many writes go in: with always, each
    # write waits for an fdatasync, a tenth of a second and more on a loaded VM's disk.
    c = Cluster(3)
    try:
        t0 = time.time()
        data, where = test_placement(c)
        print(f"ok test_placement ({time.time() - t0:.1f} s)", flush=True)
        t0 = time.time()
        test_multikey(c, data, where)
        print(f"ok test_multikey ({time.time() - t0:.1f} s)", flush=True)
        t0 = time.time()
        test_benchmark(c)
        print(f"ok test_benchmark ({time.time() - t0:.1f} s)", flush=True)
    finally:
        c.stop()
    # The same shards again (same run directory), now with appendfsync always.
    t0 = time.time()
    c = Cluster(3, "--appendfsync", "always")
    try:
        test_stop_start(c, data, where)
        print(f"ok test_stop_start ({time.time() - t0:.1f} s)", flush=True)
        t0 = time.time()
        test_shard_down(c, data, where)
        print(f"ok test_shard_down ({time.time() - t0:.1f} s)", flush=True)
    finally:
        c.stop()
    # A run directory keeps its shards' logs (and data): the eject test gets its own.
    shutil.rmtree(CLUSTER_DIR)
    CLUSTER_DIR = tempfile.mkdtemp(prefix="tessera-cluster-test-")
    t0 = time.time()
    test_auto_eject()
    print(f"ok test_auto_eject ({time.time() - t0:.1f} s)", flush=True)
    shutil.rmtree(CLUSTER_DIR)
    print("PASS", flush=True)


main()

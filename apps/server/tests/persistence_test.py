#!/usr/bin/env python3
"""tessera-kv-server's append-only log (apps/server/src/aof.h) driven by redis-py from the
project's .venv and the real binary: crashes (SIGKILL at random moments, some during a
BGREWRITEAOF) under appendfsync always and everysec, a truncated tail and a corrupt record, a
full disk (RLIMIT_FSIZE on the server process: its writes fail with EFBIG), a log directory
that is removed under the server, a read-only directory and log (at start and under load; run
by root, the server runs as nobody, as root ignores permissions), a log written by
redis-server 7, requests that are rejected, the rewrite and the replay.

The full disk is a file-size limit, not a small tmpfs: mounting one needs CAP_SYS_ADMIN or an
unprivileged user namespace, which a CI container need not grant, and the test must not skip.

Every check is on what the server answers and what its log holds; waits are bounded and say what
they waited for. Temp directories live under $TMPDIR.

    persistence_test.py --server build/dev/apps/server/tessera-kv-server --venv .venv
"""
import argparse
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


from harness import fail, free_port
import harness


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--venv", required=True)
    p.add_argument("--only", default="", help="comma-separated test names")
    return p.parse_args()


ARGS = parse_args()

harness.use_venv(ARGS.venv)  # redis-py lives in the project's virtual environment
redis = harness.import_redis(ARGS.venv)
from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

SLOW = any(s in ARGS.server for s in ("asan", "tsan"))
STARTUP_S = 60 if SLOW else 20
ROOT = tempfile.mkdtemp(prefix="tessera-aof-test-")
STARTED = []  # every server process started: a failing test leaves none running (main)


class Server:
    def __init__(self, *flags, user=()):
        """user: a command prefix that runs the server as another user (server_user)."""
        self.port = free_port()
        self.log = open(os.path.join(ROOT, f"server-{self.port}.log"), "w+")
        cmd = [*user, server_binary(user), "--port", str(self.port), "--workers", "2", *flags]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        STARTED.append(self.proc)
        harness.wait_listening(self.proc, self.port, STARTUP_S, self.output,
                               harness.tessera_ready(self.port))

    def output(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def client(self, timeout=60):
        # No retries: a request that fails (the server killed) fails here, at once.
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=timeout,
                           decode_responses=True, retry=Retry(NoBackoff(), 0))

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("server did not exit within 60 s of SIGTERM")
        if rc != 0:
            fail(f"server exited with {rc}: {self.output()[-2000:]}")


SERVER_AS_NOBODY = []  # the binary nobody can run, once server_user found it


def server_user(d):
    """The command prefix that runs the server as an unprivileged user who owns directory `d`:
    permissions do not stop root, so a test of a read-only directory run by root starts the
    server as nobody (setpriv, util-linux); run by another user, the server is that user."""
    if os.geteuid() != 0:
        return []
    harness.require_tools({"setpriv": "util-linux"})
    user = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    os.chmod(ROOT, 0o711)  # nobody may pass through the test's directory to `d`
    shutil.chown(d, "nobody", "nogroup")
    if not SERVER_AS_NOBODY:
        # The build directory may be closed to nobody: then a copy in ROOT.
        for binary in (ARGS.server, os.path.join(ROOT, "tessera-kv-server")):
            if binary != ARGS.server:
                shutil.copy2(ARGS.server, binary)
            ok = subprocess.run([*user, binary, "--version"], capture_output=True, timeout=60)
            if ok.returncode == 0:
                SERVER_AS_NOBODY.append(binary)
                break
        else:
            fail(f"user nobody cannot run {ARGS.server} (nor a copy in {ROOT})")
    probe = subprocess.run([*user, "test", "-w", d], timeout=60)
    if probe.returncode != 0:
        fail(f"user nobody cannot write to {d} (is {os.path.dirname(ROOT)} closed to it?)")
    return user


def server_binary(user):
    return SERVER_AS_NOBODY[0] if user else ARGS.server


def aof_flags(d, policy="always", *more):
    return ("--appendonly", "yes", "--appendfsync", policy, "--dir", d, *more)


def start_fails(*flags, user=()):
    """Runs the server expecting it to refuse to start; returns its output."""
    cmd = [*user, server_binary(user), "--port", str(free_port()), "--workers", "2", *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=STARTUP_S)
    if r.returncode == 0:
        fail(f"{' '.join(cmd)} started (exit 0); it must refuse: {r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def expect(got, want, what):
    if got != want:
        fail(f"{what}: got {got!r}, want {want!r}")


def wait_for(what, fn, timeout=20):
    deadline = time.time() + (timeout * 3 if SLOW else timeout)
    while time.time() < deadline:
        if fn():
            return
        time.sleep(0.05)
    fail("timed out waiting for " + what)


def info(r):
    return r.info("persistence")


def record_starts(data):
    """Byte offsets of the RESP records of a log (it must parse in full)."""
    starts, at = [], 0
    while at < len(data):
        starts.append(at)
        if data[at:at + 1] != b"*":
            fail(f"log does not parse at byte {at}")
        eol = data.index(b"\r\n", at)
        n = int(data[at + 1:eol])
        at = eol + 2
        for _ in range(n):
            eol = data.index(b"\r\n", at)
            at = eol + 2 + int(data[at + 1:eol]) + 2
    return starts


def new_dir(name):
    d = os.path.join(ROOT, name)
    os.makedirs(d)
    return d


# ---- tests -------------------------------------------------------------------------------------

def test_basics():
    d = new_dir("basics")
    aof = os.path.join(d, "appendonly.aof")
    srv = Server(*aof_flags(d, "always", "--auto-aof-rewrite-percentage", "0"))
    r = srv.client()
    expect(r.config_get("append*"), {"appendonly": "yes", "appendfsync": "always",
                                     "appendfilename": "appendonly.aof"}, "CONFIG GET append*")
    expect(r.config_get("dir"), {"dir": d}, "CONFIG GET dir")
    i = info(r)
    expect((i["aof_enabled"], i["aof_last_write_status"]), (1, "ok"), "INFO persistence")
    r.set("plain", "v")
    r.set("ttl", "t", ex=1000)
    ttl_set_at = time.monotonic()
    r.set("short", "s", px=200)
    r.set("persisted", "p", px=200)
    r.persist("persisted")  # its SET ... PXAT is in the past at the replay: PERSIST keeps it
    r.set("n", 10)
    r.incrby("n", 5)
    r.append("plain", "w")
    r.set("grown", "a", ex=1000)
    for c in "bcdefghij":
        r.append("grown", c)  # nine records of one byte each, not nine copies of the value
    r.set("lapsed", "old", px=100)
    time.sleep(0.2)
    r.append("lapsed", "new")  # the old value had expired: APPEND starts a fresh key, no TTL
    r.append("fresh", "f")
    r.mset({"m1": "1", "m2": "2"})
    r.delete("m2")
    # Several leaves' keys: one record per MSET and per DEL, as Redis writes them.
    r.mset({f"ml:{k:04d}": "0" for k in range(600)})
    r.mset({"ml:0599": "x", "ml:0000": "x", "ml:0300": "x"})
    r.delete("ml:0598", "ml:0001", "ml:0301")
    r.delete(*[f"ml:{k:04d}" for k in range(600) if k not in (0, 2, 300, 599)])  # (compaction)
    r.set("e", "x")
    r.expire("e", 500)
    r.persist("e")
    r.set("gone", "g")
    r.expire("gone", -1)
    for k in range(300):
        r.set("over", str(k))  # 300 records for one key: the rewrite compacts them
    r.set("bin\x00key", "a\r\nb")
    # The other write commands, each logged as the SET, PEXPIREAT, PERSIST or DEL it amounts to.
    r.execute_command("SETEX", "setex", 1000, "x")
    r.psetex("psetex", 100, "y")  # gone before the replay
    r.set("range", "Hello World")
    r.setrange("range", 6, "Redis")
    r.setrange("padded", 2, "p")
    r.incrbyfloat("float", "10.5")
    r.incrbyfloat("float", "0.25")
    r.set("getex", "g", ex=1000)
    r.getex("getex", persist=True)
    r.set("getex-at", "g")
    r.getex("getex-at", exat=4102444800)
    r.set("getex-gone", "g")
    r.getex("getex-gone", exat=1)
    r.set("at", "a")
    r.pexpireat("at", 4102444800123)
    r.set("rn:src", "s", ex=1000)
    r.rename("rn:src", "rn:dst")  # DEL and SET in one MULTI ... EXEC block
    r.msetnx({"nx:1": "a", "nx:2": "b"})
    r.msetnx({"nx:2": "x", "nx:3": "y"})  # refused whole: nothing logged
    r.copy("nx:1", "nx:copy")
    tx = r.pipeline()  # MULTI ... EXEC: its records as one MULTI ... EXEC block
    tx.set("tx:1", "a").incr("tx:n").incr("tx:n").delete("tx:1").set("tx:2", "b", ex=1000)
    tx.mset({"tx:3": "c", "tx:4": "d"}).append("tx:3", "+")
    tx.execute()
    time.sleep(0.3)  # "short" expires
    with open(aof, "rb") as f:
        log = f.read()
    rename = log[log.find(b"*1\r\n$5\r\nMULTI\r\n"):]
    rename = rename[:rename.find(b"*1\r\n$4\r\nEXEC\r\n")]
    if b"$3\r\nDEL\r\n$6\r\nrn:src" not in rename or b"$6\r\nrn:dst" not in rename:
        fail("RENAME's records are not one MULTI ... EXEC block: " + repr(rename[:300]))
    if b"nx:3" in log:
        fail("a refused MSETNX was logged")
    block = log[log.rfind(b"*1\r\n$5\r\nMULTI\r\n", 0, log.find(b"$4\r\ntx:1")):]
    block = block[:block.find(b"*1\r\n$4\r\nEXEC\r\n")]
    if block.count(b"tx:") != 8 or b"tx:n" not in block:  # SET, SET, SET, DEL, SET, SET, SET, SET
        fail("the transaction's records are not one MULTI ... EXEC block: " + repr(block[:400]))
    with open(aof, "rb") as f:
        appends = f.read().count(b"*3\r\n$6\r\nAPPEND\r\n$5\r\ngrown\r\n$1\r\n")
    expect(appends, 9, "APPEND records holding the suffix alone")
    with open(aof, "rb") as f:
        log = f.read()
    expect(log.count(b"*7\r\n$4\r\nMSET\r\n$7\r\nml:0000\r\n$1\r\nx\r\n$7\r\nml:0300\r\n"
                     b"$1\r\nx\r\n$7\r\nml:0599\r\n$1\r\nx\r\n"), 1,
           "one MSET record for an MSET across leaves")
    expect(log.count(b"*4\r\n$3\r\nDEL\r\n$7\r\nml:0001\r\n$7\r\nml:0301\r\n"
                     b"$7\r\nml:0598\r\n"), 1, "one DEL record for a DEL across leaves")
    expect(log.count(b"$3\r\nSET\r\n$7\r\nml:"), 0, "no SET record of an MSET's key")
    check = subprocess.run(["redis-check-aof", aof], capture_output=True, text=True, timeout=60)
    if "is valid" not in check.stdout:
        fail("redis-check-aof does not take the log: " + check.stdout + check.stderr)
    srv.stop()

    def verify(r, when):
        expect(r.get("plain"), "vw", when + ": APPEND replayed")
        expect(r.get("n"), "15", when + ": INCRBY replayed")
        expect(r.get("grown"), "abcdefghij", when + ": nine APPENDs to a key with a TTL")
        if r.ttl("grown") <= 0:
            fail(f"{when}: APPEND kept the TTL, the replay lost it: TTL {r.ttl('grown')}")
        expect((r.get("lapsed"), r.ttl("lapsed")), ("new", -1),
               when + ": APPEND to an expired key replayed as a fresh key")
        expect(r.get("fresh"), "f", when + ": APPEND of a new key replayed")
        expect(r.get("m1"), "1", when + ": MSET replayed")
        expect(r.mget("ml:0000", "ml:0300", "ml:0599", "ml:0002"), ["x", "x", "x", "0"],
               when + ": MSETs across leaves replayed")
        expect(r.exists("ml:0001", "ml:0301", "ml:0598", "ml:0597", "ml:0002"), 1,
               when + ": DELs across leaves replayed")
        expect(r.exists("m2", "gone", "short"), 0, when + ": DEL, EXPIRE -1, PX 200 replayed")
        expect(r.ttl("e"), -1, when + ": PERSIST replayed")
        expect((r.get("persisted"), r.ttl("persisted")), ("p", -1),
               when + ": PERSIST after a SET PX whose deadline passed before the replay")
        # The deadline is absolute: the TTL has gone down by the time since the SET (which
        # under load and a sanitizer can be many seconds), not restarted at 1000.
        ttl, elapsed = r.ttl("ttl"), time.monotonic() - ttl_set_at
        if not 1000 - elapsed - 2 <= ttl <= 1000 - elapsed + 1:
            fail(f"{when}: EX 1000 replayed as an absolute deadline: TTL {ttl} "
                 f"{elapsed:.1f} s after the SET")
        expect(r.get("over"), "299", when + ": the last of 300 SETs")
        expect(r.get("bin\x00key"), "a\r\nb", when + ": binary key and value")
        expect((r.get("setex"), r.ttl("setex") > 900), ("x", True), when + ": SETEX replayed")
        expect(r.exists("psetex", "getex-gone"), 0, when + ": PSETEX 100 and GETEX EXAT 1")
        expect(r.get("range"), "Hello Redis", when + ": SETRANGE replayed")
        expect(r.get("padded"), "\x00\x00p", when + ": SETRANGE past the end, zero-padded")
        expect(r.get("float"), "10.75", when + ": INCRBYFLOAT replayed")
        expect((r.get("getex"), r.ttl("getex")), ("g", -1), when + ": GETEX PERSIST replayed")
        expect(r.expiretime("getex-at"), 4102444800, when + ": GETEX EXAT replayed")
        expect(r.pexpiretime("at"), 4102444800123, when + ": PEXPIREAT replayed")
        expect((r.exists("rn:src"), r.get("rn:dst"), r.ttl("rn:dst") > 900), (0, "s", True),
               when + ": RENAME replayed")
        expect((r.get("nx:1"), r.get("nx:2"), r.exists("nx:3"), r.get("nx:copy")),
               ("a", "b", 0, "a"), when + ": MSETNX and COPY replayed")
        expect((r.get("tx:1"), r.get("tx:n"), r.get("tx:3"), r.get("tx:4")),
               (None, "2", "c+", "d"),
               when + ": a transaction replayed")
        if r.ttl("tx:2") <= 900:
            fail(f"{when}: SET EX in a transaction replayed: TTL {r.ttl('tx:2')}")

    srv = Server(*aof_flags(d, "always", "--auto-aof-rewrite-percentage", "0"))
    if "DB loaded from append only file" not in srv.output():
        fail("no start-up line about the loaded log: " + srv.output())
    r = srv.client()
    verify(r, "after a restart")
    before = os.path.getsize(aof)
    expect(r.bgrewriteaof(), True, "BGREWRITEAOF")
    wait_for("the rewrite (aof_rewrites 1)", lambda: info(r)["aof_rewrites"] == 1)
    after = os.path.getsize(aof)
    if after * 3 > before:
        fail(f"the rewrite did not compact the log: {before} -> {after} bytes")
    expect(info(r)["aof_current_size"], after, "aof_current_size after the rewrite")
    r.set("post-rewrite", "1")
    srv.kill9()
    srv = Server(*aof_flags(d, "always"))
    r = srv.client()
    verify(r, "after the rewrite and SIGKILL")
    expect(r.get("post-rewrite"), "1", "a write after the rewrite")
    srv.stop()

    # The automatic rewrite: past 100% growth over the last rewrite and 20 kB.
    srv = Server(*aof_flags(d, "everysec", "--auto-aof-rewrite-min-size", "20kb"))
    r = srv.client()
    for k in range(400):
        r.set("auto", "y" * 100 + str(k))
    wait_for("the automatic rewrite", lambda: info(r)["aof_rewrites"] >= 1)
    expect(r.get("auto"), "y" * 100 + "399", "value after the automatic rewrite")
    srv.stop()
    print("ok: basics (records, replay, redis-check-aof, BGREWRITEAOF, automatic rewrite)",
          flush=True)


def test_rejected_write_nothing():
    d = new_dir("rejected")
    aof = os.path.join(d, "appendonly.aof")
    srv = Server(*aof_flags(d, "always"))
    r = srv.client()
    r.set("s", "abc")
    r.set("t", "1")
    size = os.path.getsize(aof)
    bad = [
        ("SET", "k", "v", "EX", "abc"), ("SET", "k", "v", "EX", "0"), ("SET", "k"),
        ("SET", "k", "v", "BOGUS"), ("INCR", "s"), ("INCRBY", "t", "x"), ("APPEND", "k"),
        ("EXPIRE", "s", "abc"), ("EXPIRE", "s", "10", "NX", "XX"), ("NOSUCHCOMMAND", "k"),
        ("DECRBY", "t", "-9223372036854775808"), ("MSET", "a", "1", "b"),
    ]
    for cmd in bad:
        try:
            r.execute_command(*cmd)
            fail(f"{cmd} was accepted; it must be rejected")
        except redis.ResponseError:
            pass
    # Writes that change nothing.
    expect(r.setnx("s", "zzz"), False, "SETNX on an existing key")
    expect(r.set("s", "q", nx=True), None, "SET NX on an existing key")
    expect(r.set("missing", "q", xx=True), None, "SET XX on a missing key")
    expect(r.delete("missing"), 0, "DEL of a missing key")
    expect(r.expire("missing", 10), False, "EXPIRE of a missing key")
    expect(r.persist("s"), False, "PERSIST without a deadline")
    expect(r.getdel("missing"), None, "GETDEL of a missing key")
    # A protocol error closes the connection and runs nothing.
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nz\r\n$x\r\n")
        reply = s.recv(4096)
        if not reply.startswith(b"-ERR Protocol error"):
            fail(f"malformed request: {reply!r}")
    expect(r.ping(), True, "PING after the rejected requests")
    expect(os.path.getsize(aof), size, "log size after rejected and no-op writes")
    r.set("u", "1")
    if os.path.getsize(aof) <= size:
        fail("a SET after them did not reach the log")
    srv.stop()
    print("ok: rejected and no-op requests write nothing to the log", flush=True)


def test_truncated_and_corrupt():
    d = new_dir("truncated")
    aof = os.path.join(d, "appendonly.aof")
    srv = Server(*aof_flags(d, "always"))
    r = srv.client()
    for k in range(20):
        r.set(f"k{k}", f"value-{k}")
    srv.stop()
    good = open(aof, "rb").read()
    starts = record_starts(good)
    expect(len(starts), 20, "records in the log")
    last = starts[-1]

    # A crash in the middle of the last record's write.
    for cut in (len(good) - 3, last + 1, last + 9):
        open(aof, "wb").write(good[:cut])
        out = start_fails(*aof_flags(d, "always", "--aof-load-truncated", "no"))
        if f"truncated record at byte {last}" not in out:
            fail(f"cut at {cut}, aof-load-truncated no: the message names no offset {last}: "
                 + out)
    open(aof, "wb").write(good[:len(good) - 3])
    srv = Server(*aof_flags(d, "always"))  # aof-load-truncated yes, Redis's default
    out = srv.output()
    if f"at byte {last}" not in out or "truncated" not in out:
        fail("the truncated record was not reported with its offset: " + out)
    r = srv.client()
    expect(r.get("k18"), "value-18", "the record before the truncated one")
    expect(r.get("k19"), None, "the truncated record")
    expect(os.path.getsize(aof), last, "the log cut at the truncated record")
    r.set("k19", "again")
    srv.stop()
    srv = Server(*aof_flags(d, "always"))
    expect(srv.client().get("k19"), "again", "a write after the repair")
    srv.stop()

    # A corrupt record in the middle stops the start, whatever aof-load-truncated says.
    for what, pos, patch in (("array header", starts[10], b"!"),
                             ("bulk length", starts[10] + 4, b"#"),
                             ("missing CRLF", starts[11] - 2, b"X")):
        bad = bytearray(good)
        bad[pos:pos + 1] = patch
        open(aof, "wb").write(bytes(bad))
        for flag in ("yes", "no"):
            out = start_fails(*aof_flags(d, "always", "--aof-load-truncated", flag))
            want = starts[10]
            if f"record at byte {want} is corrupt" not in out:
                fail(f"corrupt {what} (aof-load-truncated {flag}): no offset {want}: {out}")
    open(aof, "wb").write(good)
    # A command the server cannot replay is named with its offset too.
    open(aof, "ab").write(b"*2\r\n$4\r\nLPOP\r\n$1\r\nq\r\n")
    out = start_fails(*aof_flags(d, "always"))
    if f"record at byte {len(good)}" not in out or "LPOP" not in out:
        fail("an unknown command in the log: " + out)
    print("ok: truncated tail (reported at its offset, cut with aof-load-truncated yes), "
          "corrupt records (start refused at their offset)", flush=True)


def test_disk_full():
    d = new_dir("full")
    aof = os.path.join(d, "appendonly.aof")
    srv = Server(*aof_flags(d, "always"))
    r = srv.client()
    for k in range(50):
        r.set(f"pre{k}", "p" * 100)
    limit = os.path.getsize(aof) + 4000
    _, hard = resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE)
    resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE, (limit, hard))
    acked, refused = [], []
    stop = threading.Event()

    def writer():
        w = srv.client(timeout=300)
        k = 0
        while not stop.is_set():
            try:
                w.set(f"a{k}", "a" * 100)
                acked.append(f"a{k}")
                k += 1
            except redis.ResponseError as e:
                refused.append(str(e))
                time.sleep(0.02)

    t = threading.Thread(target=writer)
    t.start()
    wait_for("aof_last_write_status:err with the log at RLIMIT_FSIZE",
             lambda: info(r)["aof_last_write_status"] == "err")
    try:
        r.set("x", "y")
        fail("a write was accepted while the log cannot be written")
    except redis.ResponseError as e:
        if not str(e).startswith("MISCONF Errors writing to the AOF file: File too large"):
            fail("write while the disk is full: " + str(e))
    expect(r.get("pre0"), "p" * 100, "a read while the disk is full")
    if acked:
        expect(r.get(acked[-1]), "a" * 100, "an acknowledged write while the disk is full")
    resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE, (hard, hard))
    wait_for("aof_last_write_status:ok once the limit is lifted",
             lambda: info(r)["aof_last_write_status"] == "ok")
    n = len(acked)
    wait_for("the writer's writes to be accepted again", lambda: len(acked) > n + 5)
    stop.set()
    t.join(timeout=120)
    if t.is_alive():
        fail("the writer is stuck after the recovery")
    expect(r.set("x", "y"), True, "a write after the recovery")
    srv.kill9()
    srv = Server(*aof_flags(d, "always"))
    r = srv.client()
    got = r.mget(acked) if acked else []
    missing = [k for k, v in zip(acked, got) if v != "a" * 100]
    if missing:
        fail(f"{len(missing)} acknowledged writes lost across the full disk: {missing[:5]}")
    expect(r.get("x"), "y", "the write after the recovery, after SIGKILL")
    expect(r.get("pre49"), "p" * 100, "a write before the full disk")
    srv.stop()
    print(f"ok: full disk (EFBIG): writes refused with MISCONF ({len(refused)} times), reads "
          f"served, recovery, {len(acked)} acknowledged writes all kept", flush=True)


def test_dir_removed():
    parent = new_dir("removed")
    d = os.path.join(parent, "data")
    srv = Server(*aof_flags(d, "always"))  # the directory is created at start
    r = srv.client()
    for k in range(30):
        r.set(f"d{k}", str(k))
    shutil.rmtree(d)
    wait_for("aof_last_write_status:err once the log's directory is gone",
             lambda: info(r)["aof_last_write_status"] == "err")
    try:
        r.set("x", "y")
        fail("a write was accepted while the log's directory is gone")
    except redis.ResponseError as e:
        if not str(e).startswith("MISCONF Errors writing to the AOF file"):
            fail("write without the log's directory: " + str(e))
    expect(r.get("d7"), "7", "a read while the log's directory is gone")
    os.mkdir(d)
    wait_for("aof_last_write_status:ok once the directory is back (the log rewritten)",
             lambda: info(r)["aof_last_write_status"] == "ok")
    expect(r.set("x", "y"), True, "a write after the recovery")
    srv.kill9()
    srv = Server(*aof_flags(d, "always"))
    r = srv.client()
    expect(r.mget([f"d{k}" for k in range(30)]), [str(k) for k in range(30)],
           "writes from before the directory was removed")
    expect(r.get("x"), "y", "the write after the recovery")
    srv.stop()
    print("ok: log directory removed: MISCONF, reads served, log rewritten when it is back",
          flush=True)


class Writer:
    """A client that SETs distinct keys as fast as it can in a thread: `acked` the keys whose
    write was acknowledged, `refused` the error replies (the write not done)."""

    def __init__(self, srv, prefix):
        self.acked, self.refused, self.errors = [], [], []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(srv.client(timeout=300), prefix))
        self.thread.start()

    def run(self, w, prefix):
        k = 0
        try:
            while not self.stop_event.is_set():
                try:
                    w.set(f"{prefix}{k}", "w" * 50)
                    self.acked.append(f"{prefix}{k}")
                    k += 1
                except redis.ResponseError as e:
                    self.refused.append(str(e))
                    time.sleep(0.02)
        except Exception as e:  # noqa: BLE001 - reported by stop()
            self.errors.append(repr(e))

    def wait_more(self, what, n=20):
        at = len(self.acked)
        wait_for(f"{n} more acknowledged writes {what}", lambda: len(self.acked) >= at + n)

    def stop(self):
        self.stop_event.set()
        self.thread.join(timeout=120)
        if self.thread.is_alive() or self.errors:
            fail(f"the writer failed or is stuck: {self.errors[:1]}")


def expect_kept(srv, keys, what):
    r = srv.client()
    for at in range(0, len(keys), 2000):
        chunk = keys[at:at + 2000]
        missing = [k for k, v in zip(chunk, r.mget(chunk)) if v != "w" * 50]
        if missing:
            fail(f"{what}: {len(missing)} acknowledged writes lost, e.g. {missing[:3]}")


def test_read_only():
    """A read-only directory or log file, at start and under the running server. Root ignores
    permissions: run by root, the server runs as nobody (server_user)."""
    d = new_dir("read-only")
    aof = os.path.join(d, "appendonly.aof")
    user = server_user(d)
    # At start: a directory the server cannot create files in (the rewrite's, the log's) and a
    # log it cannot write stop the start with the reason.
    os.chmod(d, 0o555)
    out = start_fails(*aof_flags(d), user=user)
    if "cannot create files in dir" not in out or "Permission denied" not in out:
        fail("start in a read-only directory: " + out)
    os.chmod(d, 0o755)
    srv = Server(*aof_flags(d), user=user)
    srv.client().set("first", "1")
    srv.stop()
    os.chmod(aof, 0o444)
    out = start_fails(*aof_flags(d), user=user)
    if "cannot open the append only file" not in out or "Permission denied" not in out:
        fail("start with a read-only log file: " + out)
    os.chmod(aof, 0o644)

    # The directory made read-only under load: the open log goes on (nothing refused), the
    # rewrite cannot create its file: an error reply, INFO says so, the log stays; it is retried
    # and succeeds once the directory is writable again.
    flags = aof_flags(d, "always", "--auto-aof-rewrite-percentage", "0")
    srv = Server(*flags, user=user)
    r = srv.client()
    w = Writer(srv, "ro")
    w.wait_more("before the chmod")
    ino = os.stat(aof).st_ino
    os.chmod(d, 0o555)
    w.wait_more("in the read-only directory")
    try:
        r.bgrewriteaof()
        fail("BGREWRITEAOF was accepted in a read-only directory")
    except redis.ResponseError as e:
        if "Permission denied" not in str(e):
            fail("BGREWRITEAOF in a read-only directory: " + str(e))
    i = info(r)
    expect((i["aof_last_bgrewrite_status"], i["aof_rewrite_scheduled"], i["aof_rewrites"],
            i["aof_last_write_status"]), ("err", 1, 0, "ok"), "INFO after the failed rewrite")
    w.wait_more("after the failed rewrite")
    expect(os.stat(aof).st_ino, ino, "the log's inode (the old log kept)")
    expect([n for n in os.listdir(d) if n != "appendonly.aof"], [], "files left in the dir")
    os.chmod(d, 0o755)
    wait_for("the retried rewrite once the directory is writable",
             lambda: info(r)["aof_rewrites"] == 1)
    i = info(r)
    expect((i["aof_last_bgrewrite_status"], i["aof_rewrite_scheduled"]), ("ok", 0),
           "INFO after the retried rewrite")
    w.wait_more("after the rewrite")

    # The log replaced by a read-only file: written to no more, rewritten from memory (the
    # rename replaces the read-only file), and writes go on.
    shutil.copy(aof, aof + ".copy")
    os.chmod(aof + ".copy", 0o444)
    os.replace(aof + ".copy", aof)
    wait_for("the rewrite of the replaced log", lambda: info(r)["aof_rewrites"] == 2)
    w.wait_more("after the log was replaced")
    w.stop()
    if os.stat(aof).st_mode & 0o200 == 0:
        fail("the log is still the read-only file that replaced it")
    if not all(e.startswith("MISCONF") for e in w.refused):
        # Writes between the replacement's discovery and the rewrite are refused, not lost.
        fail(f"writes while the log was replaced: {w.refused[:2]}")
    srv.kill9()
    srv = Server(*flags, user=user)
    expect_kept(srv, w.acked, "after the read-only directory and log and SIGKILL")
    expect(srv.client().get("first"), "1", "the write before the read-only log")
    srv.stop()
    print(f"ok: read-only directory and log at start refused; directory read-only under load: "
          f"{len(w.acked)} writes acknowledged and kept, the rewrite refused, retried and done; "
          f"a replaced log rewritten ({len(w.refused)} writes refused meanwhile)", flush=True)


def state_of(c):
    """{key: (value, TTL in seconds or -1)} of a server's whole store."""
    keys = sorted(c.keys("*"))
    vals = c.mget(keys) if keys else []
    p = c.pipeline(transaction=False)
    for k in keys:
        p.ttl(k)
    return dict(zip(keys, zip(vals, p.execute())))


def redis_server_log(d, *flags):
    """Starts redis-server with its log in `d`; returns (process, client)."""
    port = free_port()
    log = open(os.path.join(ROOT, f"redis-server-{port}.log"), "w+")
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--dir", d, "--save", "", "--appendonly", "yes", "--appendfsync",
                             "always", *flags], stdout=log, stderr=subprocess.STDOUT)
    STARTED.append(proc)
    harness.wait_listening(proc, port, STARTUP_S, lambda: open(log.name).read(),
                           "Ready to accept connections")
    return proc, redis.Redis(host="127.0.0.1", port=port, decode_responses=True)


def redis_server_rewrite(c):
    c.bgrewriteaof()
    wait_for("redis-server's BGREWRITEAOF", lambda: c.info("persistence")
             ["aof_rewrite_in_progress"] == 0 and c.info("persistence")
             ["aof_rewrite_scheduled"] == 0)


def redis_server_stop(proc, c):
    try:
        c.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    proc.wait(timeout=60)


def test_redis_server_log():
    """A log written by redis-server 7 (its multi-part directory: manifest, base and incremental
    files, RESP with aof-use-rdb-preamble no) replays to the store redis-server had: the string
    commands as redis-server logs them (INCR, APPEND, SETNX, ..., MULTI/EXEC, SELECT 0), then
    the server goes on in its own file. An RDB base is refused with advice; a transaction cut
    off by the end of the log is a truncated tail."""
    d = new_dir("redis-log")
    proc, c = redis_server_log(d, "--aof-use-rdb-preamble", "no")
    c.set("flushed", "x")
    c.flushdb()
    c.set("base", "b")
    c.set("base:ttl", "b", ex=1000)
    c.set("n2", "5")
    redis_server_rewrite(c)  # these go into the base file, the rest into the incremental one
    c.set("n", 10)
    c.incr("n")
    c.incrby("n", 100)
    c.decr("n")
    c.decrby("n", 5)
    c.incr("n2")
    c.append("s", "hello")
    c.append("s", " world")
    c.append("base", "+")
    c.set("ttl", "t", ex=1000)
    c.execute_command("SETEX", "setex", 2000, "v")
    c.execute_command("PSETEX", "psetex", 3000000, "v")
    c.incr("ttl:n")
    c.expire("ttl:n", 500)
    c.incr("ttl:n")  # INCR keeps the deadline
    c.mset({"m1": "1", "m2": "2", "m3": "3"})
    c.delete("m2")
    c.unlink("m3")
    c.setnx("nx", "first")
    c.setnx("nx", "second")
    c.getset("gs", "a")
    c.getset("gs", "b")
    c.set("gd", "x")
    c.getdel("gd")
    c.set("opt", "v", nx=True)
    c.set("opt", "w", xx=True, get=True)
    c.set("keep", "1", ex=1500)
    c.set("keep", "2", keepttl=True)
    c.expire("keep", 100, gt=True)  # 100 < 1500: no change
    c.expire("keep", 1200, lt=True)
    c.expire("n2", 900, nx=True)
    c.incrbyfloat("float", 1.5)  # logged as SET ... KEEPTTL
    c.set("range", "Hello World", ex=1000)
    c.setrange("range", 6, "Redis")  # logged as itself; the deadline stays
    c.setrange("range:new", 3, "x")  # zero-padded
    c.set("getex", "g", ex=1000)
    c.getex("getex", persist=True)  # logged as PERSIST
    c.set("getex:px", "g")
    c.getex("getex:px", px=1000000)  # logged as PEXPIREAT
    c.set("rn:a", "ra", ex=1000)
    c.rename("rn:a", "rn:b")  # logged as itself, as are RENAMENX, COPY and MSETNX
    c.set("rn:c", "rc")
    c.renamenx("rn:b", "rn:c")  # refused: no record
    c.renamenx("rn:c", "rn:d")
    c.copy("rn:b", "rn:e")
    c.copy("rn:d", "rn:e", replace=True)
    c.msetnx({"mnx:1": "1", "mnx:2": "2"})
    c.msetnx({"mnx:2": "x", "mnx:3": "3"})  # refused
    c.set("z", "1", px=1000)
    c.persist("z")  # expired by the replay, were it not for this
    tx = c.pipeline(transaction=True)
    tx.incr("tx")
    tx.append("s", "!")
    tx.set("tx:s", "y")
    tx.execute()
    c.delete("n")  # and back, so the last record is not the transaction
    c.set("n", "104")
    want = state_of(c)
    stopped = time.monotonic()
    redis_server_stop(proc, c)
    parts = sorted(os.listdir(os.path.join(d, "appendonlydir")))
    expect(parts, ["appendonly.aof.2.base.aof", "appendonly.aof.2.incr.aof",
                   "appendonly.aof.manifest"], "redis-server's log files")
    time.sleep(1.1)  # z's deadline passes

    srv = Server(*aof_flags(d, "always"))
    if "DB loaded from redis-server's append only files" not in srv.output():
        fail("no start-up line about redis-server's log: " + srv.output())
    got = state_of(srv.client())
    elapsed = time.monotonic() - stopped
    if set(got) != set(want):
        fail(f"keys after replaying redis-server's log: {sorted(got)}, redis-server had "
             f"{sorted(want)}")
    for k, (value, ttl) in want.items():
        gvalue, gttl = got[k]
        if gvalue != value or (ttl < 0) != (gttl < 0) or not ttl - elapsed - 2 <= gttl <= ttl:
            fail(f"{k} after replaying redis-server's log: {got[k]}, redis-server had "
                 f"{want[k]} {elapsed:.1f} s before")
    srv.client().set("ours", "1")
    srv.stop()
    # The server's own file from now on (redis-server's files left as they were).
    srv = Server(*aof_flags(d, "always"))
    expect(srv.client().get("ours"), "1", "a write after the import, after a restart")
    expect(srv.client().get("n"), "104", "an imported key, after a restart")
    srv.stop()
    expect(sorted(os.listdir(os.path.join(d, "appendonlydir"))), parts,
           "redis-server's files after the import")

    # A transaction the end of the log cuts off never happened (as in redis-server).
    aof = os.path.join(d, "appendonly.aof")
    size = os.path.getsize(aof)
    with open(aof, "ab") as f:
        f.write(b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$2\r\ntx\r\n")
    out = start_fails(*aof_flags(d, "always", "--aof-load-truncated", "no"))
    if f"transaction without its EXEC (its MULTI at byte {size} " not in out:
        fail("a log ending inside a transaction: " + out)
    srv = Server(*aof_flags(d, "always"))
    expect(srv.client().get("tx"), "1", "the key of the cut-off transaction")
    expect(os.path.getsize(aof), size, "the log cut at the transaction's MULTI")
    srv.stop()

    # redis-server's default base file is RDB: refused, saying how to get a RESP one.
    d2 = new_dir("redis-rdb")
    proc, c = redis_server_log(d2)
    c.set("k", "v")
    redis_server_rewrite(c)
    redis_server_stop(proc, c)
    out = start_fails(*aof_flags(d2))
    if "RDB format" not in out or "aof-use-rdb-preamble no" not in out:
        fail("redis-server's RDB base file: " + out)
    print(f"ok: redis-server 7's multi-part log (base and incremental RESP files, {len(want)} "
          "keys) replayed to its store, a cut-off transaction dropped, an RDB base refused",
          flush=True)


def test_rewrite_under_writes():
    """Rewrites while clients overwrite, increment, append to, expire and delete a small key
    space: after a SIGKILL the replayed store equals the one the clients left (the snapshot and
    the tail overlap; records being assignments, the overlap changes nothing)."""
    d = new_dir("rewrite-mix")
    # everysec: a reply waits for write(), so a SIGKILL loses no acknowledged write either.
    flags = aof_flags(d, "everysec", "--auto-aof-rewrite-percentage", "0")
    srv = Server(*flags)
    space = 20000  # ~80 leaves: a rewrite's walk takes a few steps while the writers run
    r = srv.client()
    for at in range(0, space, 1000):
        r.mset({f"m{k}": "init" for k in range(at, at + 1000)})
    stop = threading.Event()
    errors = []
    ops = [0] * 4

    def mixer(tid):
        w = srv.client()
        rnd = random.Random(tid)
        try:
            while not stop.is_set():
                ops[tid] += 1
                k = f"m{rnd.randrange(space)}"
                op = rnd.randrange(7)
                if op == 0:
                    w.set(k, f"s{tid}")
                elif op == 1:
                    try:
                        w.incr(k + ":n")
                    except redis.ResponseError:
                        pass
                elif op == 2:
                    w.append(k, "+")
                elif op == 3:
                    w.delete(k)
                elif op == 4:
                    w.expire(k, 1000)
                elif op == 5:
                    w.persist(k)
                else:
                    w.mset({k: "a", k + ":m": "b"})
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=mixer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for _ in range(5):
        done = info(r)["aof_rewrites"]
        r.bgrewriteaof()
        wait_for("a rewrite under writes", lambda: info(r)["aof_rewrites"] > done)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    if errors:
        fail("a writer failed during the rewrites: " + errors[0])

    def state(c):
        keys = sorted(c.keys("*"))
        vals = c.mget(keys) if keys else []
        p = c.pipeline(transaction=False)
        for k in keys:
            p.ttl(k)
        ttls = [t > 0 for t in p.execute()]
        return dict(zip(keys, zip(vals, ttls)))

    before = state(r)
    srv.kill9()
    srv = Server(*flags)
    after = state(srv.client())
    if before != after:
        diff = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
        fail(f"after 5 rewrites under writes and SIGKILL, {len(diff)} keys differ, e.g. "
             f"{diff[0]}: {before.get(diff[0])} before, {after.get(diff[0])} after")
    srv.stop()
    print(f"ok: 5 rewrites under {sum(ops)} mixed writes: the replay equals the store "
          f"({len(after)} keys)", flush=True)


def crash_rounds(policy, rounds, name):
    d = new_dir(name)
    flags = aof_flags(d, policy)
    acked = {}  # key -> (value, monotonic time of the reply)
    srv = Server(*flags)
    in_rewrite = 0
    lost_everysec = 0
    for rnd in range(rounds):
        stop = threading.Event()

        def writer(tid, port=srv.port, rnd=rnd, stop=stop):
            w = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30,
                            retry=Retry(NoBackoff(), 0))
            i = 0
            try:
                while not stop.is_set():
                    k, v = f"r{rnd}:{tid}:{i}", f"v{rnd}.{tid}.{i}." + "x" * (i % 50)
                    w.set(k, v)
                    acked[k] = (v, time.monotonic())
                    i += 1
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                pass

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        time.sleep(random.uniform(0.1, 0.5))
        if rnd % 3 == 2:
            try:
                srv.client().bgrewriteaof()
            except redis.ResponseError:
                pass  # one already running
            time.sleep(random.uniform(0.0, 0.03))
        killed_at = time.monotonic()
        srv.kill9()
        stop.set()
        for t in threads:
            t.join(timeout=60)
        if any(n.startswith("temp-rewriteaof-") for n in os.listdir(d)):
            in_rewrite += 1
        srv = Server(*flags)
        r = srv.client()
        keys = list(acked)
        for at in range(0, len(keys), 2000):
            chunk = keys[at:at + 2000]
            for k, got in zip(chunk, r.mget(chunk)):
                want, when = acked[k]
                if got == want:
                    continue
                if got is not None:
                    fail(f"{policy} round {rnd}: {k} = {got!r}, acknowledged as {want!r}")
                if policy == "always" or killed_at - when > 2.0:
                    fail(f"{policy} round {rnd}: {k}, acknowledged {killed_at - when:.2f} s "
                         f"before the SIGKILL, is missing after the restart")
                lost_everysec += 1
                del acked[k]
    srv.stop()
    print(f"ok: {rounds} SIGKILL rounds under appendfsync {policy}: {len(acked)} acknowledged "
          f"writes all present ({lost_everysec} of the last 2 s missing), {in_rewrite} kills "
          "during a rewrite", flush=True)


def test_crash():
    crash_rounds("always", 14, "crash-always")
    crash_rounds("everysec", 8, "crash-everysec")


TESTS = [test_basics, test_rejected_write_nothing, test_truncated_and_corrupt, test_disk_full,
         test_dir_removed, test_read_only, test_redis_server_log, test_rewrite_under_writes,
         test_crash]

if __name__ == "__main__":
    harness.require_tools({"redis-check-aof": "redis-server", "redis-server": "redis-server"})
    only = set(filter(None, ARGS.only.split(",")))
    t0 = time.time()
    try:
        for test in TESTS:
            if not only or test.__name__ in only:
                test()
    finally:
        for proc in STARTED:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if os.environ.get("KEEP_TEST_FILES"):
            print("persistence: files and server logs kept in " + ROOT, flush=True)
        else:
            shutil.rmtree(ROOT, ignore_errors=True)
    print(f"persistence: all passed in {time.time() - t0:.1f} s", flush=True)

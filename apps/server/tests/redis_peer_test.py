#!/usr/bin/env python3
"""tessera-kv-server against redis-server (Debian's, 7.0): the same commands sent to both, the
replies compared byte for byte — values, integers, nulls and the error texts clients match on.
The script covers the string commands and the keyspace's: each one's normal use, its edge cases
(negative ranges, padding, float formatting, deadlines in the past) and its errors (wrong
arity, non-numbers, bad options), in RESP2 and again in RESP3.

A missing redis-server is a failure that names the package to install, never a skip.

    redis_peer_test.py --server build/dev/apps/server/tessera-kv-server
"""
import argparse
import socket
import subprocess
import time

import harness
from harness import fail, free_port


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    return p.parse_args()


ARGS = parse_args()
harness.require_tools({"redis-server": "redis-server"})
SLOW = any(s in ARGS.server for s in ("asan", "tsan"))

# A Unix time far ahead (2100-01-01) and one in the past, for the absolute deadlines.
FUTURE = "4102444800"
FUTURE_MS = "4102444800123"

# Each entry is a command; the replies of both servers must be the same bytes. Entries marked
# ("shape", ...) compare only the reply's type and size (TIME).
SCRIPT = [
    # GET, SET and their options
    ["FLUSHALL"],
    ["SET", "s", "hello"], ["GET", "s"], ["GET", "nokey"],
    ["SET", "s", "v", "EX", "0"], ["SET", "s", "v", "EX", "x"], ["SET", "s", "v", "NX", "XX"],
    ["SET", "s", "v", "FOO"], ["SET", "s"], ["GET"], ["GET", "a", "b"],
    ["SET", "s", "hello", "GET"], ["SET", "n", "1", "XX"], ["SET", "n", "1", "NX", "GET"],
    ["SETNX", "n", "2"], ["GETSET", "n", "3"], ["GETDEL", "n"], ["GETDEL", "n"],
    ["SET", "s", "hello"],
    # GETRANGE / SUBSTR
    ["GETRANGE", "s", "0", "-1"], ["GETRANGE", "s", "1", "3"], ["GETRANGE", "s", "-3", "-1"],
    ["GETRANGE", "s", "5", "10"], ["GETRANGE", "s", "-1", "-5"], ["GETRANGE", "s", "10", "20"],
    ["GETRANGE", "s", "-100", "100"], ["GETRANGE", "s", "3", "1"], ["GETRANGE", "nokey", "0", "-1"],
    ["GETRANGE", "s", "a", "1"], ["GETRANGE", "s", "0"], ["SUBSTR", "s", "0", "1"],
    # SETRANGE
    ["SETRANGE", "s", "6", "world"], ["GET", "s"], ["SETRANGE", "s", "0", "J"], ["GET", "s"],
    ["SETRANGE", "new", "3", "abc"], ["GET", "new"], ["SETRANGE", "new2", "0", ""],
    ["EXISTS", "new2"], ["SETRANGE", "s", "0", ""], ["SETRANGE", "s", "-1", "x"],
    ["SETRANGE", "s", "x", "y"], ["SETRANGE", "big", "536870912", "x"],
    ["SETRANGE", "big", "100000", "x"], ["STRLEN", "big"], ["GETRANGE", "big", "99998", "-1"],
    ["DEL", "big"],
    # APPEND, STRLEN, INCR family
    ["APPEND", "a", "12"], ["APPEND", "a", "3"], ["STRLEN", "a"], ["INCR", "a"], ["DECR", "a"],
    ["INCRBY", "a", "-200"], ["DECRBY", "a", "x"], ["INCR", "s"], ["INCRBY", "a"],
    ["SET", "max", "9223372036854775807"], ["INCR", "max"], ["DECRBY", "a", "-9223372036854775808"],
    # INCRBYFLOAT
    ["INCRBYFLOAT", "f", "10.5"], ["INCRBYFLOAT", "f", "0.1"], ["INCRBYFLOAT", "f", "-5"],
    ["INCRBYFLOAT", "f", "5.0e3"], ["INCRBYFLOAT", "f", "-5005.6"], ["GET", "f"],
    ["INCRBYFLOAT", "f", "abc"], ["INCRBYFLOAT", "f", " 1"], ["INCRBYFLOAT", "f", "1x"],
    ["INCRBYFLOAT", "f", "nan"], ["INCRBYFLOAT", "f", "inf"], ["INCRBYFLOAT", "f", ""],
    ["INCRBYFLOAT", "s", "1"], ["SET", "f2", "3.0"], ["INCRBYFLOAT", "f2", "1"],
    ["INCRBYFLOAT", "f3", "1e20"], ["INCRBYFLOAT", "f3", "0.000001"], ["INCRBYFLOAT", "a", "2"],
    ["SET", "f4", "-0.0"], ["INCRBYFLOAT", "f4", "0"], ["INCRBYFLOAT", "f5", "1.5e-10"],
    # SETEX, PSETEX, TTL
    ["SETEX", "e", "100", "v"], ["TTL", "e"], ["GET", "e"], ["SETEX", "e", "0", "v"],
    ["SETEX", "e", "-1", "v"], ["SETEX", "e", "x", "v"], ["SETEX", "e", "100"],
    ["PSETEX", "e", "200000", "w"], ["TTL", "e"], ["GET", "e"], ["PSETEX", "e", "0", "w"],
    ["SETEX", "e", "9223372036854775807", "v"],
    # GETEX
    ["GETEX", "e"], ["GETEX", "e", "PERSIST"], ["TTL", "e"], ["GETEX", "e", "EX", "100"],
    ["TTL", "e"], ["GETEX", "e", "PX", "300000"], ["TTL", "e"], ["GETEX", "e", "EX", "0"],
    ["GETEX", "e", "EX", "-1"], ["GETEX", "e", "EX", "x"], ["GETEX", "e", "FOO"],
    ["GETEX", "e", "EX", "10", "PX", "10"], ["GETEX", "e", "PERSIST", "EX", "10"],
    ["GETEX", "e", "EX", "10", "EX", "20"], ["TTL", "e"], ["GETEX", "e", "EX"],
    ["GETEX", "nokey", "EX", "10"], ["GETEX", "e", "EXAT", FUTURE], ["EXPIRETIME", "e"],
    ["GETEX", "e", "PXAT", FUTURE_MS], ["PEXPIRETIME", "e"], ["GETEX", "e", "EXAT", "1"],
    ["EXISTS", "e"], ["GETEX"],
    # EXPIRE family, absolute deadlines, EXPIRETIME
    ["SET", "k", "v"], ["EXPIRETIME", "k"], ["PEXPIRETIME", "k"], ["EXPIRETIME", "nokey"],
    ["EXPIREAT", "k", FUTURE, "GT"], ["EXPIREAT", "k", FUTURE, "XX"], ["EXPIREAT", "k", FUTURE],
    ["EXPIRETIME", "k"], ["PEXPIRETIME", "k"], ["TTL", "nokey"], ["PEXPIREAT", "k", FUTURE_MS],
    ["PEXPIRETIME", "k"], ["EXPIRETIME", "k"], ["EXPIREAT", "k", "4102444700", "GT"],
    ["EXPIREAT", "k", "4102444700", "LT"], ["EXPIRETIME", "k"], ["EXPIREAT", "k", FUTURE, "NX"],
    ["EXPIREAT", "k", "x"], ["EXPIREAT", "k", "100", "FOO"], ["EXPIREAT", "k", FUTURE, "NX", "XX"],
    ["EXPIREAT", "k", FUTURE, "GT", "LT"], ["EXPIREAT", "k", "x", "FOO"],
    ["EXPIREAT", "k", "9223372036854775807"], ["EXPIREAT", "nokey", FUTURE],
    ["PEXPIREAT", "k", "-9223372036854775808"], ["EXISTS", "k"], ["SET", "k", "v"],
    ["EXPIREAT", "k", "1"], ["EXISTS", "k"], ["SET", "k", "v"], ["EXPIRE", "k", "100", "NX"],
    ["TTL", "k"], ["EXPIRE", "k", "50", "GT"], ["EXPIRE", "k", "50", "LT"], ["TTL", "k"],
    ["EXPIRE", "k", "-1"], ["EXISTS", "k"], ["PERSIST", "nokey"], ["EXPIRE", "k"],
    # TYPE, TOUCH, EXISTS, DEL, MGET, MSET
    ["SET", "t", "1"], ["TYPE", "t"], ["TYPE", "nokey"], ["TOUCH", "t", "s", "nokey", "t"],
    ["TOUCH"], ["EXISTS", "t", "t", "nokey"], ["MSET", "m1", "a", "m2", "b"],
    ["MGET", "m1", "nokey", "m2"], ["MSET", "m1"], ["MSET", "m1", "a", "m2"],
    ["DEL", "m1", "m2", "nokey"], ["UNLINK", "t"], ["DBSIZE"],
    # MULTI / EXEC / DISCARD (WATCH is refused by tessera-kv-server: integration_test.py)
    ["MULTI"], ["SET", "tx", "1"], ["INCR", "tx"], ["GET", "tx"], ["EXEC"],
    ["MULTI"], ["SET", "tx", "x"], ["INCR", "tx"], ["GET", "tx"], ["EXEC"],
    ["MULTI"], ["EXEC"], ["EXEC"], ["DISCARD"], ["MULTI"], ["MULTI"], ["DISCARD"],
    ["MULTI"], ["SET", "tx", "2"], ["DISCARD"], ["GET", "tx"],
    ["MULTI"], ["NOSUCHCOMMAND"], ["SET", "tx", "3"], ["EXEC"], ["GET", "tx"],
    ["MULTI"], ["GET"], ["EXEC"], ["MULTI"], ["WATCH", "tx"], ["EXEC"],
    ["MULTI"], ["MSET", "t1", "a", "t2", "b"], ["DEL", "t1", "nokey"], ["MGET", "t1", "t2"],
    ["EXISTS", "t1", "t2"], ["SET", "t1", "v", "FOO"], ["APPEND", "t2", "c"], ["EXEC"],
    ["MULTI"], ["DEL", "tx"], ["SET", "tx", "5"], ["SET", "tx", "6", "GET"], ["INCRBYFLOAT", "tx", "1.5"],
    ["GETEX", "tx", "PX", "100000"], ["GETDEL", "t2"], ["EXEC"], ["GET", "tx"], ["TTL", "tx"],
    ["MULTI"], ["PING"], ["ECHO", "e"], ["SELECT", "0"], ["EXEC"], ["UNWATCH"],
    # the connection's commands and errors
    ["PING"], ["PING", "hi"], ["ECHO", "x"], ["ECHO"], ["SELECT", "0"], ["NOSUCHCOMMAND", "a", "b"],
    ["FLUSHALL", "BAD"], ["DBSIZE", "x"],
    ("shape", ["TIME"]),
]


class Conn:
    """One connection that sends a command and reads exactly one reply, as raw bytes."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                fail("connection closed in the middle of a reply")
            self.buf += chunk
        i = self.buf.index(b"\r\n") + 2
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exactly(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                fail("connection closed in the middle of a reply")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def reply(self):
        head = self.line()
        kind, rest = head[:1], head[1:-2]
        if kind in b"$=!":  # bulk, verbatim, bulk error
            n = int(rest)
            return head if n < 0 else head + self.exactly(n + 2)
        if kind in b"*~>%|":  # array, set, push, map, attribute
            n = int(rest)
            count = n * 2 if kind in b"%|" else n
            out = head
            for _ in range(max(count, 0)):
                out += self.reply()
            return out
        return head  # + - : _ , # (

    def call(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a.encode() if isinstance(a, str) else a
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.s.sendall(b"".join(parts))
        return self.reply()


def start(cmd, port, ready, log):
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    harness.wait_listening(proc, port, 60 if SLOW else 20, lambda: open(log.name).read(), ready)
    return proc


def shape(reply):
    return reply[:1] + reply.split(b"\r\n", 1)[0][1:]  # type and count


def run(protocol):
    tport, rport = free_port(), free_port()
    tlog = open(f"/tmp/redis-peer-tessera-{tport}.log", "w+")
    rlog = open(f"/tmp/redis-peer-redis-{rport}.log", "w+")
    tessera = start([ARGS.server, "--port", str(tport), "--workers", "2"], tport,
                    harness.tessera_ready(tport), tlog)
    redis = start(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", "/tmp"], rport, "Ready to accept", rlog)
    try:
        t, r = Conn(tport), Conn(rport)
        if protocol == 3:
            t.call("HELLO", "3")
            r.call("HELLO", "3")
        mismatches = []
        for entry in SCRIPT:
            only_shape = isinstance(entry, tuple)
            cmd = entry[1] if only_shape else entry
            got, want = t.call(*cmd), r.call(*cmd)
            if only_shape:
                got, want = shape(got), shape(want)
            if got != want:
                mismatches.append(f"  {' '.join(cmd)}\n    tessera: {got[:200]!r}\n"
                                  f"    redis:   {want[:200]!r}")
        if mismatches:
            fail(f"RESP{protocol}: {len(mismatches)} of {len(SCRIPT)} replies differ from "
                 "redis-server's:\n" + "\n".join(mismatches))
        print(f"ok RESP{protocol}: {len(SCRIPT)} commands, the same replies as redis-server",
              flush=True)
    finally:
        for p in (tessera, redis):
            p.terminate()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    t0 = time.time()
    run(2)
    run(3)
    print(f"PASS ({time.time() - t0:.1f} s)", flush=True)


main()

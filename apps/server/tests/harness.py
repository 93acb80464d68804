"""What the server's Python tests (integration_test.py, persistence_test.py, cluster_test.py)
share: failing with a message, running under the project's .venv (where redis-py is), checking
that the command-line tools are installed, and a free port.

    import harness
    ARGS = parse_args()
    harness.use_venv(ARGS.venv)          # re-executes the test under .venv/bin/python
    redis = harness.import_redis(ARGS.venv)
    harness.require_tools({"redis-cli": "redis-tools"})
"""
import importlib
import os
import shutil
import socket
import sys
import time


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def use_venv(venv):
    """Returns only under the virtual environment's python: re-executes the test there first."""
    python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if not os.path.exists(python):
        fail(f"{python} is missing: run scripts/install-deps.sh (it creates .venv/ from "
             "requirements.txt, which has redis-py)")
    os.execv(python, [python] + sys.argv)


def import_redis(venv):
    try:
        return importlib.import_module("redis")
    except ImportError:
        fail("redis-py is not installed in " + venv + ": run scripts/install-deps.sh")


def require_tools(packages):
    """packages: {tool: the Debian package that has it}. A missing tool fails, never skips."""
    for tool, package in packages.items():
        if shutil.which(tool) is None:
            fail(f"{tool} not found: run scripts/install-deps.sh (apt-get install {package})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tessera_ready(port):
    """The line tessera-kv-server prints once it listens on `port` (for wait_listening)."""
    return f" port {port}, "


def wait_listening(proc, port, seconds, output, ready=None):
    """Waits until the server started as `proc` accepts on 127.0.0.1:`port`; fails, with its
    output (`output()`), if it exits first or `seconds` pass. `ready`: text its output must
    show first (that it bound the port): free_port() only found the port free, and another
    process that takes it before the server binds would otherwise answer for it."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            fail(f"server exited at start ({proc.returncode}): {output()}")
        if ready is not None and ready not in output():
            time.sleep(0.02)
            continue
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.02)
    fail("server did not start listening: " + output())

#!/usr/bin/env python3
"""Genie beside NIXL and Mooncake Transfer Engine, measured in one run.

The same bytes move between two processes on this host with each system,
WRITE (initiator's buffer into the target's) and READ (back):

  genie-tcp     genie_tensor_write/read of one tensor on "remote:0" of a
                `genie serve --port 0` child, over Genie's TCP transport;
  genie-ucx     the same against the same server over Genie's ucx transport
                (GENIE_TRANSPORT=ucx: the connection fails rather than fall
                back to TCP; docs/ucx.md); the server grants this local
                client its tensor, whose bytes then move one-sided
                (process_vm_writev/readv; GENIE_LOCAL_RMA=0 in the
                environment sends them through the server instead);
  nixl-ucx      two NIXL agents, DRAM to DRAM over NIXL's UCX backend, each
                agent's metadata handed to the other out of band
                (get_agent_metadata / add_remote_agent, as NIXL's examples);
  mooncake-tcp  two Mooncake Transfer Engines over its TCP transport with
                P2P handshake metadata (no metadata server), transfer_sync_*.

Genie's side is timed in C (bench/peers/genie_side.c, the public C API);
the peers' sides in their Python APIs, as their users call them. Each
initiator gets commands from this script over a pipe and times its own
calls; both sides' CPU time is read from /proc around each measurement.

Rounds are interleaved: in each round every size runs every system (the
order of the systems rotates from round to round), WRITE then READ, each
for up to --secs seconds (at least one call). Then 4 KiB latency: single
calls, timed one by one. Before the rounds each system writes a pattern at
every size up to 64 MiB and reads it back into a cleared buffer.

Prints throughput (Gbit/s median, min-max over rounds), the median of the
per-round ratios Genie/peer on the transport both run (TCP: Mooncake; UCX:
NIXL), 4 KiB latency (p50, p99 of all calls), CPU seconds per GiB moved on
each side, and exactly why a peer did not run. Goals (docs/benchmarks.md):
Genie >= 1.0x each peer's throughput from 1 MiB up, <= 1.0x its p50 at
4 KiB.

Same conditions: UCX_TLS=tcp,self,sm and UCX_NET_DEVICES=lo for both UCX
systems (unless set); a system whose processes poll while idle (NIXL's
progress threads) is stopped with SIGSTOP while the others are measured;
as root, the measuring part runs in a network namespace of its own with
only loopback (the peers' listeners bind every interface).

The peers come from PyPI (bench/transfer_peers.requirements.txt, pinned):
the script creates a virtual environment for them outside the source tree,
${XDG_CACHE_HOME:-~/.cache}/genie/transfer-peers-<hash of the pins>, and
installs them there unless --no-install (then it uses the environment only
if it is there). --quick runs tiny sizes for the test suite; it never
checks a time, but exits 1 if Genie's side fails or its bytes come back
wrong (a peer's failure is reported, not fatal).

usage: transfer_peers.py [--build DIR] [--quick] [--max-size N] [--rounds N]
                         [--secs S] [--no-install] [--json FILE]
"""
import argparse
import base64
import glob
import hashlib
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIREMENTS = os.path.join(HERE, "transfer_peers.requirements.txt")
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
VERIFY_MAX = 64 * MIB  # the pattern check runs at every size up to this
REPLY_TIMEOUT_S = 300
IDLE_POLL_PERCENT = 2.0  # idle CPU (% of a core, both sides) above which a system is paused
PAIRS = (("genie-tcp", "mooncake-tcp"), ("genie-ucx", "nixl-ucx"))


# --------------------------------------------------------------------------
# Workers: the peers' two sides, run with the peers' virtual environment.
# Same line protocol as bench/peers/genie_side.c (see there), plus
# "setup N" on a target and "connect N INFO" on an initiator.
# --------------------------------------------------------------------------

def _reply(out, text):
    out.write(text + "\n")
    out.flush()


def _pattern(np, n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def _missing_libs(path):
    """Why a shared library does not load here: ldd's complaints."""
    if not os.path.exists(path):
        return ""
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    why = [ln.strip().replace(os.path.dirname(path) + "/", "") for ln in (r.stdout + r.stderr).splitlines()
           if "not found" in ln and not ln.strip().startswith(("libnixl", "libserdes"))]
    return " (%s)" % "; ".join(why) if why else ""


def _probe():
    """What of the peers imports and runs here, as one JSON line."""
    import importlib.metadata as md
    import os.path
    report = {}

    def version(pkg):
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    nixl = {"packages": {p: version(p) for p in ("nixl", "nixl-cu12")}}
    try:
        import ctypes
        import nixl._api as nx
        libdir = os.path.join(os.path.dirname(os.path.dirname(nx.__file__)), "nixl_cu12.libs")
        agent = nx.nixl_agent("probe", nx.nixl_agent_config(backends=[]))
        nixl["plugins"] = agent.get_plugin_list()
        backends = {}
        for b in ("UCX", "LIBFABRIC", "UCCL", "GPUNETIO", "POSIX"):
            if b not in nixl["plugins"]:
                backends[b] = "no plugin in this wheel"
                continue
            try:
                agent.create_backend(b, {})
                backends[b] = "ok (memory: %s)" % ", ".join(agent.get_backend_mem_types(b))
                if b == "POSIX":
                    backends[b] += ", file I/O: not a transfer between two agents"
            except Exception as e:  # noqa: BLE001 (the peer's own error, reported)
                backends[b] = "%s: %s" % (type(e).__name__, e) + _missing_libs(
                    os.path.join(libdir, "nixl", "libplugin_%s.so" % b))
        nixl["backends"] = backends
        libs = glob.glob(os.path.join(libdir, "libucp-*.so*"))
        if libs:
            ucp = ctypes.CDLL(libs[0])
            ucp.ucp_get_version_string.restype = ctypes.c_char_p
            nixl["ucx"] = ucp.ucp_get_version_string().decode()
        nixl["ok"] = "UCX" in backends and backends["UCX"].startswith("ok")
    except Exception as e:  # noqa: BLE001
        nixl["ok"] = False
        nixl["error"] = "%s: %s" % (type(e).__name__, e)
    report["nixl"] = nixl

    mc = {"packages": {"mooncake-transfer-engine-non-cuda": version("mooncake-transfer-engine-non-cuda")}}
    try:
        from mooncake.engine import TransferEngine  # noqa: F401
        mc["ok"] = True
        ib = glob.glob("/sys/class/infiniband/*")
        mc["rdma"] = "devices: " + ", ".join(os.path.basename(d) for d in ib) if ib else \
            "no RDMA device (/sys/class/infiniband is empty): TCP transport only"
    except Exception as e:  # noqa: BLE001
        mc["ok"] = False
        mc["error"] = "%s: %s" % (type(e).__name__, e)
    report["mooncake"] = mc
    return report


class _NixlSide:
    def __init__(self, np, role):
        import nixl._api as nx
        self.nx = nx
        self.agent = nx.nixl_agent("%s-%d" % (role, os.getpid()), nx.nixl_agent_config(backends=["UCX"]))
        if "UCX" not in self.agent.backends:
            raise RuntimeError("NIXL's UCX backend did not start")
        self.handles = {}

    def register(self, addr, n):
        self.agent.register_memory([(addr, n, 0, "")], "DRAM")

    def info(self, addr):
        return {"md": base64.b64encode(self.agent.get_agent_metadata()).decode(), "addr": addr}

    def connect(self, info):
        self.remote = self.agent.add_remote_agent(base64.b64decode(info["md"]))
        self.raddr = info["addr"]

    def move(self, op, laddr, n):
        h = self.handles.get((op, n))
        if h is None:
            loc = self.agent.get_xfer_descs([(laddr, n, 0)], "DRAM")
            rem = self.agent.get_xfer_descs([(self.raddr, n, 0)], "DRAM")
            h = self.agent.initialize_xfer("WRITE" if op == "w" else "READ", loc, rem, self.remote)
            self.handles[(op, n)] = h
        st, t0 = self.agent.transfer(h), time.monotonic()
        while st == "PROC" and time.monotonic() - t0 < REPLY_TIMEOUT_S / 2:
            st = self.agent.check_xfer_state(h)
        if st != "DONE":
            raise RuntimeError("NIXL transfer of %d bytes: %s" % (n, st))


class _MooncakeSide:
    def __init__(self, np, role):
        from mooncake.engine import TransferEngine
        self.e = TransferEngine()
        rc = self.e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
        if rc != 0:
            raise RuntimeError("TransferEngine.initialize(tcp, P2PHANDSHAKE) returned %d" % rc)

    def register(self, addr, n):
        rc = self.e.register_memory(addr, n)
        if rc != 0:
            raise RuntimeError("register_memory returned %d" % rc)

    def info(self, addr):
        return {"session": "127.0.0.1:%d" % self.e.get_rpc_port(), "addr": addr}

    def connect(self, info):
        self.session, self.raddr = info["session"], info["addr"]

    def move(self, op, laddr, n):
        f = self.e.transfer_sync_write if op == "w" else self.e.transfer_sync_read
        rc = f(self.session, laddr, self.raddr, n)
        if rc != 0:
            raise RuntimeError("Mooncake transfer_sync of %d bytes returned %d" % (n, rc))


def worker_main(role):
    # Replies go to the original stdout; whatever the libraries print on
    # stdout (NIXL logs there) goes to stderr, the log.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    if role == "probe":
        _reply(out, json.dumps(_probe()))
        os._exit(0)
    import numpy as np
    system, side = role.split("-")
    cls = _NixlSide if system == "nixl" else _MooncakeSide
    eng, buf = None, None
    try:
        for line in sys.stdin:
            a = line.split()
            if not a:
                continue
            if a[0] == "q":
                break
            if a[0] == "setup":  # target
                buf = np.zeros(int(a[1]), np.uint8)
                eng = cls(np, "target")
                eng.register(buf.ctypes.data, buf.size)
                _reply(out, "ok " + base64.b64encode(json.dumps(eng.info(buf.ctypes.data)).encode()).decode())
            elif a[0] == "connect":  # initiator
                buf = np.ones(int(a[1]), np.uint8)  # touched now, not during a timed call
                eng = cls(np, "init")
                eng.register(buf.ctypes.data, buf.size)
                eng.connect(json.loads(base64.b64decode(a[2])))
                _reply(out, "ok")
            elif a[0] in ("w", "r"):
                n, reps, secs = int(a[1]), int(a[2]), float(a[3])
                addr, calls = buf.ctypes.data, 0
                t0 = t1 = time.perf_counter()
                while calls < reps:
                    eng.move(a[0], addr, n)
                    calls += 1
                    t1 = time.perf_counter()
                    if t1 - t0 >= secs:
                        break
                _reply(out, "%d %.9f" % (calls, t1 - t0))
            elif a[0] in ("lw", "lr"):
                n, calls, op, addr = int(a[1]), int(a[2]), a[0][1], buf.ctypes.data
                us = []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    eng.move(op, addr, n)
                    us.append((time.perf_counter() - t0) * 1e6)
                _reply(out, " ".join("%.3f" % u for u in us))
            elif a[0] == "v":
                n, seed = int(a[1]), int(a[2])
                want = _pattern(np, n, seed)
                buf[:n] = want
                eng.move("w", buf.ctypes.data, n)
                buf[:n] = 0
                eng.move("r", buf.ctypes.data, n)
                bad = np.flatnonzero(buf[:n] != want)
                _reply(out, "ok" if bad.size == 0 else "mismatch at byte %d of %d: read %d, wrote %d" %
                       (bad[0], n, buf[bad[0]], want[bad[0]]))
            else:
                raise ValueError("bad command: " + line.strip())
    except Exception as e:  # noqa: BLE001 (reported to the driver)
        _reply(out, "error %s: %s" % (type(e).__name__, e))
        out.close()
        os._exit(1)
    out.close()
    # NIXL's teardown at interpreter exit can crash (seen: SIGSEGV after the
    # agent is gone); the measurements are in, so leave without it.
    os._exit(0)


# --------------------------------------------------------------------------
# The driver (Debian's python3, standard library only).
# --------------------------------------------------------------------------

class SideError(RuntimeError):
    pass


def cpu_seconds(pid):
    """CPU time of every thread of `pid` so far (ns resolution from
    schedstat where the kernel has it, else clock ticks)."""
    total, seen = 0, False
    for f in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
                seen = True
        except (OSError, ValueError, IndexError):
            pass
    if seen:
        return total / 1e9
    try:
        with open("/proc/%d/stat" % pid) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


class Side:
    """A process that takes one command a line and answers one line."""

    timeout = REPLY_TIMEOUT_S

    def __init__(self, name, argv, env, logdir):
        self.name = name
        self.log = os.path.join(logdir, name + ".log")
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(self.log, "w"), text=True, bufsize=1)
        self.pid = self.p.pid

    def cmd(self, line):
        try:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        # Every command answers well within this (a 1 GiB call at 0.1 Gbit/s
        # takes 90 s); a side that does not answer is stuck, not slow.
        if not select.select([self.p.stdout], [], [], self.timeout)[0]:
            self.p.kill()
            raise SideError("%s: no reply to %r within %d s%s" % (self.name, line[:60], self.timeout,
                                                                   self.log_tail()))
        reply = self.p.stdout.readline().strip()
        if not reply or reply.startswith("error"):
            raise SideError("%s: %r -> %s%s" % (self.name, line[:60], reply or "no reply (exited %s)" %
                                                self.p.poll(), self.log_tail()))
        return reply

    def log_tail(self, lines=8):
        try:
            with open(self.log, errors="replace") as f:
                tail = [ln.rstrip() for ln in f.readlines()[-lines:]]
        except OSError:
            return ""
        return ("\n      " + "\n      ".join(tail)) if tail else ""

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("q\n")
                self.p.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


class System:
    """An initiator Side and the pid of its target (server or peer)."""

    def __init__(self, name, init, target_pid, note):
        self.name, self.init, self.target_pid, self.note = name, init, target_pid, note
        self.polls = False  # burns CPU while idle: stopped while others run

    def pause(self, stop):
        if self.polls:
            for pid in (self.init.pid, self.target_pid):
                try:
                    os.kill(pid, signal.SIGSTOP if stop else signal.SIGCONT)
                except ProcessLookupError:
                    pass

    def measure(self, line):
        c0 = (cpu_seconds(self.init.pid), cpu_seconds(self.target_pid))
        reply = self.init.cmd(line)
        c1 = (cpu_seconds(self.init.pid), cpu_seconds(self.target_pid))
        return reply, c1[0] - c0[0], c1[1] - c0[1]


def peers_env(allow_install, status):
    """The peers' virtual environment's python, or None (reason in status)."""
    with open(REQUIREMENTS, "rb") as f:
        pins = f.read()
    # Debian's interpreter where there is one, whichever python runs this.
    base = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    ver = subprocess.run([base, "-c", "import sys; print(sys.version)"], capture_output=True, text=True).stdout
    key = hashlib.sha256(pins + ver.encode()).hexdigest()[:12]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    venv = os.path.join(cache, "genie", "transfer-peers-" + key)
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(os.path.join(venv, ".complete")):
        return py, venv
    if not allow_install:
        status["install"] = "not installed (%s missing; run without --no-install to install)" % venv
        return None, venv
    # Made in place and marked complete last: a run cut short leaves no
    # environment that looks usable (the next run starts it again).
    shutil.rmtree(venv, ignore_errors=True)
    print("installing the peers into %s (pins: %s) ..." % (venv, os.path.relpath(REQUIREMENTS)), flush=True)
    steps = [[base, "-m", "venv", venv],
             [os.path.join(venv, "bin", "pip"), "install", "--no-deps", "--disable-pip-version-check",
              "--progress-bar", "off", "-q", "-r", REQUIREMENTS]]
    for step in steps:
        r = subprocess.run(step, capture_output=True, text=True)
        if r.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            status["install"] = "failed: %s exited %d: %s" % (
                " ".join(os.path.basename(s) for s in step[:3]), r.returncode,
                " | ".join((r.stderr or r.stdout).strip().splitlines()[-4:]))
            return None, venv
    open(os.path.join(venv, ".complete"), "w").close()
    return py, venv


def start_genie_server(build, env, logdir):
    out = os.path.join(logdir, "genie-serve.out")
    p = subprocess.Popen([os.path.join(build, "genie"), "serve", "--port", "0"], env=env,
                         stdout=open(out, "w"), stderr=open(os.path.join(logdir, "genie-serve.log"), "w"))
    deadline = time.time() + 60
    while time.time() < deadline:
        with open(out) as f:
            for line in f:
                if line.startswith("genie serve listening on 127.0.0.1:"):
                    return p, int(line.rsplit(":", 1)[1])
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    raise SideError("genie serve did not start: " + open(os.path.join(logdir, "genie-serve.log")).read()[-800:])


def parse_size(s):
    m = re.fullmatch(r"(\d+)\s*([kmg]?)(i?b)?", s.strip().lower())
    n = int(m.group(1)) * {"": 1, "k": KIB, "m": MIB, "g": GIB}[m.group(2)] if m else 0
    if n < 4 * KIB or n % 4:
        raise argparse.ArgumentTypeError("a size of at least 4 KiB, a multiple of 4 (4096, 64M, 1G): %r" % s)
    return n


def label(n):
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if n >= unit and n % unit == 0:
            return "%d %s" % (n // unit, name)
    return "%d B" % n


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(q * len(v) + 0.999999) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("GENIE_BUILD_DIR"),
                    help="the build directory (genie, bench/transfer_peers_genie); default $GENIE_BUILD_DIR, "
                         "else build-release-test or build beside bench/")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one round (a smoke run; figures mean nothing)")
    ap.add_argument("--max-size", type=parse_size, help="largest transfer (default 1 GiB, --quick 1 MiB), e.g. 64M")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 5, --quick 1)")
    ap.add_argument("--secs", type=float, help="time per measurement (default 0.4 s, --quick 0.02)")
    ap.add_argument("--no-install", action="store_true", help="use the peers only if already installed")
    ap.add_argument("--json", help="also write the results as JSON")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker_main(a.worker)
    if a.rounds is not None and not 1 <= a.rounds <= 1000:
        ap.error("--rounds must be in 1..1000")
    if a.secs is not None and not 0 < a.secs <= 60:
        ap.error("--secs must be in (0, 60]")

    t_start = time.time()
    # The peers' listeners bind every interface (Mooncake's on 0.0.0.0 and
    # [::] whatever it is told; UCX's TCP on every network device): where
    # it can (root, unshare), the run goes on in a network namespace of its
    # own with only loopback, once the peers are installed (from PyPI, so
    # outside it).
    if "GENIE_TRANSFER_PEERS_NETNS" not in os.environ and os.geteuid() == 0 and shutil.which("ip") and \
            shutil.which("unshare") and subprocess.run(["unshare", "--net", "true"],
                                                       stderr=subprocess.DEVNULL).returncode == 0:
        peers_env(not a.no_install, {})
        argv = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:] + ["--no-install"]
        return subprocess.run(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"] + argv,
                              env=dict(os.environ, GENIE_TRANSFER_PEERS_NETNS="1")).returncode
    build = a.build
    if not build:
        for d in ("build-release-test", "build"):
            if os.path.exists(os.path.join(HERE, "..", d, "genie")):
                build = os.path.join(HERE, "..", d)
                break
    if not build:
        sys.exit("transfer_peers: no build directory with genie (give --build DIR)")
    build = os.path.abspath(build)
    helper = os.path.join(build, "bench", "transfer_peers_genie")
    for f in (os.path.join(build, "genie"), helper):
        if not os.access(f, os.X_OK):
            sys.exit("transfer_peers: %s is not built" % f)

    max_size = a.max_size or (MIB if a.quick else GIB)
    sizes = [4 * KIB]
    while sizes[-1] * 4 <= max_size:
        sizes.append(sizes[-1] * 4)
    if a.quick:
        sizes = [s for s in sizes if s in (4 * KIB, 64 * KIB, MIB)] or sizes[:1]
    rounds = a.rounds or (1 if a.quick else 5)
    secs = a.secs or (0.02 if a.quick else 0.4)
    lat_calls = 20 if a.quick else 1000
    Side.timeout = 60 if a.quick else REPLY_TIMEOUT_S
    target_bytes = MIB if a.quick else 64 * MIB
    max_size = sizes[-1]

    env = dict(os.environ)
    for k in ("GENIE_MASTER_ADDR", "GENIE_MASTER_PORT", "GENIE_AUTH_TOKEN", "GENIE_NODE_ID", "GENIE_BACKEND",
              "GENIE_TRANSPORT"):
        env.pop(k, None)
    # One UCX transport set for both UCX systems (Genie's plugin and NIXL's
    # UCX backend), as Genie's tests and benchmarks use here.
    env.setdefault("UCX_TLS", "tcp,self,sm")
    env.setdefault("UCX_NET_DEVICES", "lo")
    env.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")
    env["GLOG_minloglevel"] = env.get("GLOG_minloglevel", "1")  # Mooncake's info lines
    logdir = tempfile.mkdtemp(prefix="transfer_peers.")
    status, notes, systems, sides, procs = {}, {}, [], [], []
    genie_failed = []

    def fatal(msg):
        print("FAIL (Genie): " + msg, flush=True)
        genie_failed.append(msg)

    try:
        # --- Genie: one server offering tcp and (where built) ucx -------------
        has_ucx = os.path.exists(os.path.join(build, "libgenie_transport_ucx.so"))
        senv = dict(env, GENIE_SERVE_TRANSPORTS="tcp,ucx" if has_ucx else "tcp")
        server, port = start_genie_server(build, senv, logdir)
        procs.append(server)
        for tr in ("tcp", "ucx"):
            name = "genie-" + tr
            if tr == "ucx" and not has_ucx:
                status[name] = "not run: the ucx transport is not built (UCX not found at configure time)"
                continue
            cenv = dict(env, GENIE_MASTER_ADDR="127.0.0.1", GENIE_MASTER_PORT=str(port), GENIE_BACKEND=tr,
                        GENIE_TRANSPORT=tr)
            s = Side(name, [helper], cenv, logdir)
            sides.append(s)
            try:
                s.cmd("alloc %d" % max_size)
            except SideError as e:
                fatal(str(e))
                continue
            systems.append(System(name, s, server.pid, "genie serve pid %d" % server.pid))
            status[name] = "ok"
        if has_ucx:
            r = subprocess.run(["ucx_info", "-v"], capture_output=True, text=True)
            m = re.search(r"Version (\S+)", r.stdout)
            notes["genie-ucx"] = "UCX %s (system)" % (m.group(1) if m else "version unknown (ucx_info -v)")

        # --- the peers ----------------------------------------------------------
        py, venv = peers_env(not a.no_install, status)
        probe = {}
        if py:
            try:
                r = subprocess.run([py, os.path.abspath(__file__), "--worker", "probe"], capture_output=True,
                                   text=True, env=env, timeout=120)
                probe = json.loads(r.stdout.strip().splitlines()[-1])
            except subprocess.TimeoutExpired:
                status["probe"] = "the probe (importing the peers) did not finish within 120 s"
            except (ValueError, IndexError):
                status["probe"] = "the probe failed (exit %d): %s" % (r.returncode, r.stderr.strip()[-600:])
        for peer, tr in (("nixl", "ucx"), ("mooncake", "tcp")):
            name = "%s-%s" % (peer, tr)
            info = probe.get(peer)
            if not py:
                status[name] = "not run: peers " + status["install"]
                continue
            if not info or not info.get("ok"):
                status[name] = "not run: " + (info or {}).get("error", status.get("probe", "probe failed")) + \
                    ("; backends: %s" % info["backends"] if info and "backends" in info else "")
                continue
            notes[name] = ", ".join("%s %s" % kv for kv in info["packages"].items()) + \
                ("; UCX %s (bundled)" % info["ucx"] if "ucx" in info else "")
            if peer == "nixl":
                others = {b: v for b, v in info["backends"].items() if b != "UCX"}
                notes[name] += "; other backends: " + "; ".join("%s: %s" % kv for kv in others.items())
            else:
                notes[name] += "; rdma: " + info["rdma"]
            tgt = Side(name + "-target", [py, os.path.abspath(__file__), "--worker", peer + "-target"], env, logdir)
            ini = Side(name + "-init", [py, os.path.abspath(__file__), "--worker", peer + "-init"], env, logdir)
            sides += [tgt, ini]
            try:
                meta = tgt.cmd("setup %d" % max_size).split()[1]
                ini.cmd("connect %d %s" % (max_size, meta))
            except SideError as e:
                status[name] = "not run: " + str(e)
                tgt.close()
                ini.close()
                continue
            systems.append(System(name, ini, tgt.pid, "target pid %d" % tgt.pid))
            status[name] = "ok"

        # --- bytes intact, and every target's memory touched ----------------------
        for sysm in list(systems):
            try:
                for i, n in enumerate(s for s in sizes if s <= VERIFY_MAX):
                    reply = sysm.init.cmd("v %d %d" % (n, 7 + i))
                    if reply != "ok":
                        raise SideError("%s: %s bytes came back wrong: %s" % (sysm.name, label(n), reply))
                for op in ("w", "r"):
                    sysm.init.cmd("%s %d 1 0" % (op, max_size))
            except SideError as e:
                if sysm.name.startswith("genie"):
                    fatal(str(e))
                else:
                    status[sysm.name] = "failed: " + str(e)
                systems.remove(sysm)
        if genie_failed:
            return 1

        # --- idle CPU: what a system's processes cost while another one runs -----
        idle = {}
        t0, c0 = time.time(), {s.name: (cpu_seconds(s.init.pid), cpu_seconds(s.target_pid)) for s in systems}
        time.sleep(0.2 if a.quick else 1.0)
        dt = time.time() - t0
        for s in systems:
            idle[s.name] = tuple(100 * (cpu_seconds(p) - c) / dt for p, c in zip((s.init.pid, s.target_pid),
                                                                                 c0[s.name]))
            # A system whose processes poll while idle (NIXL's progress
            # threads here) would take CPU from the one being measured on a
            # small host: it is stopped (SIGSTOP) until its own turn.
            s.polls = sum(idle[s.name]) > IDLE_POLL_PERCENT
            s.pause(True)

        # --- interleaved rounds ---------------------------------------------------
        thr = {}   # (system, op, size) -> [Gbit/s per round]
        cpu = {}   # (system, op, size) -> [init s, target s, bytes]
        lat = {}   # (system, op) -> [[us ...] per round]
        def measure(sysm, line):
            """The reply, or None once a peer failed (it is dropped)."""
            try:
                return sysm.measure(line)
            except SideError as e:
                if sysm.name.startswith("genie"):
                    raise
                status[sysm.name] = "failed during the rounds: " + str(e)
                systems.remove(sysm)
                return None

        for r in range(rounds):
            order = systems[r % len(systems):] + systems[:r % len(systems)] if systems else []
            for n in sizes:
                reps = max(1, -(-target_bytes // n))
                for sysm in order:
                    sysm.pause(False)
                    for op in ("w", "r"):
                        got = sysm in systems and measure(sysm, "%s %d %d %g" % (op, n, reps, secs))
                        if not got:
                            break
                        calls, sec = got[0].split()
                        calls, sec = int(calls), float(sec)
                        thr.setdefault((sysm.name, op, n), []).append(8.0 * n * calls / sec / 1e9)
                        acc = cpu.setdefault((sysm.name, op, n), [0.0, 0.0, 0])
                        acc[0] += got[1]
                        acc[1] += got[2]
                        acc[2] += n * calls
                    sysm.pause(True)
            for sysm in order:
                sysm.pause(False)
                for op in ("w", "r"):
                    warm = sysm in systems and measure(sysm, "l%s %d %d" % (op, sizes[0], max(5, lat_calls // 20)))
                    got = warm and measure(sysm, "l%s %d %d" % (op, sizes[0], lat_calls))
                    if not got:
                        break
                    lat.setdefault((sysm.name, op), []).append([float(x) for x in got[0].split()])
                sysm.pause(True)
    except SideError as e:
        fatal(str(e))
        return 1
    finally:
        for s in systems:
            s.pause(False)
        for s in sides:
            s.close()
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if not genie_failed:
            shutil.rmtree(logdir, ignore_errors=True)
        else:
            print("logs kept in " + logdir)

    report(a, sizes, rounds, secs, lat_calls, systems, status, notes, idle, thr, cpu, lat, time.time() - t_start)
    return 0


def report(a, sizes, rounds, secs, lat_calls, systems, status, notes, idle, thr, cpu, lat, elapsed):
    names = [s.name for s in systems]
    med = statistics.median
    print("Genie beside NIXL and Mooncake Transfer Engine, two processes on 127.0.0.1: %d interleaved round%s, "
          "%s .. %s, up to %g s per measurement" % (rounds, "s" * (rounds != 1), label(sizes[0]), label(sizes[-1]),
                                                    secs))
    try:
        load = open("/proc/loadavg").read().split()[:3]
    except OSError:
        load = ["?"]
    print("host: %d CPUs, load average %s; UCX_TLS=%s; network: %s" % (
        os.cpu_count(), " ".join(load), os.environ.get("UCX_TLS", "tcp,self,sm"),
        "a namespace of the run's own, loopback only" if os.environ.get("GENIE_TRANSFER_PEERS_NETNS") else
        "the host's (not root, or no unshare: the peers' listeners bind every interface)"))
    print("\nsystems:")
    for name in ("genie-tcp", "genie-ucx", "nixl-ucx", "mooncake-tcp"):
        line = "  %-13s %s" % (name, status.get(name, "not run"))
        if name in notes:
            line += "\n  %-13s %s" % ("", notes[name])
        if name in idle:
            line += "\n  %-13s idle CPU: initiator %.1f%%, target %.1f%% of a core%s" % (
                "", *idle[name], " (so stopped while the others run)" if sum(idle[name]) > IDLE_POLL_PERCENT else "")
        print(line)
    if not names:
        return

    def cell(name, op, n):
        v = thr.get((name, op, n))
        return "%7.2f (%.2f-%.2f)" % (med(v), min(v), max(v)) if v else "-"

    def ratio(g, p, op, n):
        gv, pv = thr.get((g, op, n)), thr.get((p, op, n))
        if not gv or not pv:
            return None
        return med(x / y for x, y in zip(gv, pv))

    pairs = [(g, p) for g, p in PAIRS if g in names and p in names]
    print("\nthroughput, Gbit/s median (min-max over rounds); Genie/peer: median of per-round ratios")
    hdr = "%-8s %-5s" % ("size", "op") + "".join(" %22s" % n for n in names) + \
        "".join(" %14s" % ("%s/%s" % (g.split("-")[0], p.split("-")[0]) + "(" + g.split("-")[1] + ")")
                for g, p in pairs)
    print(hdr)
    rows = []
    for n in sizes:
        for op in ("w", "r"):
            line = "%-8s %-5s" % (label(n), "WRITE" if op == "w" else "READ")
            row = {"bytes": n, "op": "write" if op == "w" else "read", "gbps": {}, "ratio": {}}
            for name in names:
                line += " %22s" % cell(name, op, n)
                v = thr.get((name, op, n))
                if v:
                    row["gbps"][name] = {"median": med(v), "min": min(v), "max": max(v), "rounds": v}
            for g, p in pairs:
                x = ratio(g, p, op, n)
                line += " %14s" % ("%.2f" % x if x is not None else "-")
                if x is not None:
                    row["ratio"]["%s/%s" % (g, p)] = x
            print(line)
            rows.append(row)

    print("\nlatency at %s, one call at a time, us: p50 / p99 (%d calls x %d rounds); Genie/peer: median of "
          "per-round p50 ratios" % (label(sizes[0]), lat_calls, rounds))
    print("%-5s" % "op" + "".join(" %18s" % n for n in names) + "".join(
        " %14s" % ("%s/%s" % (g.split("-")[0], p.split("-")[0]) + "(" + g.split("-")[1] + ")") for g, p in pairs))
    latency = {}
    for op in ("w", "r"):
        line = "%-5s" % ("WRITE" if op == "w" else "READ")
        for name in names:
            allv = [x for rnd in lat.get((name, op), []) for x in rnd]
            line += " %18s" % ("%.1f / %.1f" % (pct(allv, 0.5), pct(allv, 0.99)) if allv else "-")
            if allv:
                latency.setdefault(name, {})["write" if op == "w" else "read"] = {
                    "p50_us": pct(allv, 0.5), "p99_us": pct(allv, 0.99), "calls": len(allv)}
        for g, p in pairs:
            gr, pr = lat.get((g, op), []), lat.get((p, op), [])
            x = med(pct(u, 0.5) / pct(v, 0.5) for u, v in zip(gr, pr)) if gr and pr else None
            line += " %14s" % ("%.2f" % x if x is not None else "-")
            if x is not None:
                latency.setdefault("ratio_p50", {})["%s/%s %s" % (g, p, "write" if op == "w" else "read")] = x
        print(line)

    print("\nCPU seconds per GiB moved, initiator + target (all rounds of that size)")
    print("%-8s %-5s" % ("size", "op") + "".join(" %22s" % n for n in names))
    cpu_rows = []
    for n in sizes:
        if n < MIB and n != sizes[0]:
            continue
        for op in ("w", "r"):
            line = "%-8s %-5s" % (label(n), "WRITE" if op == "w" else "READ")
            for name in names:
                ci, ct, b = cpu.get((name, op, n), (0, 0, 0))
                if b:
                    line += " %22s" % ("%.2f + %.2f" % (ci / (b / GIB), ct / (b / GIB)))
                    cpu_rows.append({"bytes": n, "op": op, "system": name, "init_s_per_gib": ci / (b / GIB),
                                     "target_s_per_gib": ct / (b / GIB)})
                else:
                    line += " %22s" % "-"
            print(line)

    goals = []
    for g, p in pairs:
        lo = [r["ratio"].get("%s/%s" % (g, p)) for r in rows if r["bytes"] >= MIB]
        lo = [x for x in lo if x is not None]
        l50 = [latency.get("ratio_p50", {}).get("%s/%s %s" % (g, p, o)) for o in ("write", "read")]
        goals.append("%s vs %s: smallest throughput ratio from 1 MiB up %s (goal >= 1.0); 4 KiB p50 ratio write "
                     "%s, read %s (goal <= 1.0)" % (g, p, "%.2f" % min(lo) if lo else "-",
                                                    *("%.2f" % x if x is not None else "-" for x in l50)))
    if goals:
        print("\n" + "\n".join(goals))
    print("\nelapsed %.0f s" % elapsed)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bench": "transfer_peers", "rounds": rounds, "secs": secs, "sizes": sizes,
                       "status": status, "notes": notes, "idle_cpu_percent": idle, "rows": rows,
                       "latency": latency, "cpu": cpu_rows, "goals": goals}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

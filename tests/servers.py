"""Real HTTP servers on 127.0.0.1 for testing the HTTP Range client.

Two servers, stdlib only:

``Nginx``
    A private nginx instance (own temp prefix, own port) serving a directory.
    It is the reference for what a correct, production-grade server does with
    ``Range`` requests and keep-alive.  Every request is recorded in an access
    log (method, uri, Range header, status, body bytes, connection serial
    number, request number on that connection) which ``entries()`` /
    ``mark()`` / ``since()`` parse, so tests can count round trips and check
    connection reuse.

``FaultServer``
    A deliberately misbehaving static file server (``http.server``, HTTP/1.1
    keep-alive).  The first path segment selects a fault mode, e.g.
    ``/drop/model.aero``; see ``MODES``.  It exists to prove the client never
    returns wrong bytes and never hangs, whatever the server does.
    ``server.requests`` records every request.

``PlainHttp``
    ``python3 -m http.server`` serving a directory: a real server that does
    not support Range requests (it answers every GET with the whole file).

``S3Server``
    moto's standalone S3 API server (``python -m moto.server``, a subprocess on
    127.0.0.1), reached through s3fs with ``endpoint_url`` exactly as a user's
    bucket would be.  Its werkzeug request log is kept: ``requests()`` lists
    (method, path, status) per request, so tests count round trips.

All are context managers::

    with Nginx(root) as ngx:
        get(ngx.url + "/model.aero")
        assert ngx.entries()[-1]["status"] == 200
"""

import atexit
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Nginx", "FaultServer", "MODES", "S3Server", "PlainHttp"]

_LOG_FIELDS = ("method", "uri", "range", "status", "bytes", "connection", "connection_requests")
_LOG_FORMAT = ("log_format rangetest '$request_method\\t$uri\\t$http_range\\t$status\\t"
               "$body_bytes_sent\\t$connection\\t$connection_requests';")

_CONF = """\
daemon off;
master_process on;
worker_processes 1;
{user}pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
worker_shutdown_timeout 1s;
events {{ worker_connections 256; }}
http {{
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    types {{ application/octet-stream aero; application/json json; }}
    default_type application/octet-stream;
    sendfile on;
    keepalive_timeout 30;
    keepalive_requests 100000;
    {log_format}
    access_log {prefix}/access.log rangetest;
    server {{
{listens}        root {root};
        location / {{ }}
    }}
}}
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """A private nginx serving ``root`` on ``127.0.0.1:<port>`` (+ ``extra_ports``)."""

    def __init__(self, root, *, extra_ports=()):
        self.root = os.path.abspath(os.fspath(root))
        self.extra_ports = tuple(int(p) for p in extra_ports)
        self.port = None
        self.url = None
        self.prefix = None
        self.access_log_path = None
        self._proc = None

    @staticmethod
    def free_port_available(port):
        """True if 127.0.0.1:``port`` can be bound right now."""
        with socket.socket() as s:
            # SO_REUSEADDR like nginx: TIME_WAIT leftovers don't block a listener
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
            return True

    def start(self):
        """Start nginx on a free port and wait until it serves; returns self."""
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.path.exists(binary):
            raise RuntimeError("nginx is not installed: apt-get install nginx-light "
                               "(the README's test command does this)")
        self.prefix = tempfile.mkdtemp(prefix="rangetest-nginx-")
        self.access_log_path = os.path.join(self.prefix, "access.log")
        atexit.register(self.stop)
        try:
            for attempt in range(5):
                port = _free_port()
                error = self._launch(binary, port)
                if error is None:
                    return self
                if f"127.0.0.1:{port} failed" not in error or attempt == 4:  # else: lost a race
                    raise RuntimeError("nginx failed to start:\n" + error)
        except BaseException:
            self.stop()
            raise

    def _launch(self, binary, port):
        """Start nginx on ``port``; return None when serving, else the error text."""
        listens = "".join(f"        listen 127.0.0.1:{p};\n" for p in (port, *self.extra_ports))
        conf = os.path.join(self.prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(_CONF.format(prefix=self.prefix, root=self.root, listens=listens,
                                 log_format=_LOG_FORMAT,
                                 user="user root root;\n" if os.geteuid() == 0 else ""))
        # nginx writes its pid file only after *all* listen sockets are bound
        # (it retries a busy port for ~2.5 s while the others already accept).
        pidfile = os.path.join(self.prefix, "nginx.pid")
        if os.path.exists(pidfile):
            os.remove(pidfile)  # stale, from a killed attempt (removed before the new one starts)
        with open(os.path.join(self.prefix, "nginx.out"), "ab") as out:
            self._proc = subprocess.Popen([binary, "-p", self.prefix, "-c", conf],
                                          stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._proc.poll() is None:
            try:
                if not os.path.exists(pidfile):
                    raise OSError("no pid file yet")
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                self.port, self.url = port, f"http://127.0.0.1:{port}"
                return None
            except OSError:
                time.sleep(0.02)
        self._terminate()
        logs = [os.path.join(self.prefix, n) for n in ("error.log", "nginx.out")]
        return "\n".join(open(p, errors="replace").read() for p in logs if os.path.exists(p)) \
            or "(no output; timed out waiting for the port)"

    def _terminate(self):
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGQUIT)  # graceful: finish in-flight requests
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # own session: workers too
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self):
        """Graceful SIGQUIT (SIGKILL to the process group after 5 s); remove the prefix."""
        self._terminate()
        atexit.unregister(self.stop)
        if self.prefix:
            shutil.rmtree(self.prefix, ignore_errors=True)
            self.prefix = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- access log ---------------------------------------------------------
    def _read(self):
        try:
            with open(self.access_log_path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            parts = line.split("\t")
            if len(parts) != len(_LOG_FIELDS):
                continue
            e = dict(zip(_LOG_FIELDS, parts))
            e["range"] = None if e["range"] == "-" else e["range"]
            for k in ("status", "bytes", "connection", "connection_requests"):
                e[k] = int(e[k])
            out.append(e)
        return out

    def entries(self):
        """All logged requests, re-read until stable for ~50 ms (max 1 s)."""
        entries = self._read()
        changed = start = time.monotonic()
        while time.monotonic() - changed < 0.05 and time.monotonic() - start < 1.0:
            time.sleep(0.01)
            again = self._read()
            if len(again) != len(entries):
                changed = time.monotonic()
            entries = again
        return entries

    def mark(self):
        """Number of entries so far; pass it to ``since()``."""
        return len(self.entries())

    def since(self, mark):
        """Entries logged after ``mark()`` returned ``mark``."""
        return self.entries()[mark:]


# ---------------------------------------------------------------------------
MODES = ("ok", "ignore-range", "drop", "drop-always", "flaky", "always-500",
         "bad-range", "alter", "slow", "stall", "claim", "new-etag", "overlong", "mute")
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


def _parse_range(header, total):
    """None = no/ignorable Range; "bad" = unsatisfiable; else (start, end) inclusive."""
    m = _RANGE_RE.match((header or "").strip())
    if not m or m.group(1) == m.group(2) == "":
        return None
    if m.group(1) == "":  # suffix: last n bytes
        n = int(m.group(2))
        return (max(total - n, 0), total - 1) if n and total else "bad"
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else total - 1
    if start >= total or (m.group(2) and end < start):
        return "bad"  # like nginx, which also answers "bytes=10-5" with 416
    return start, min(end, total - 1)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.server._track(self.connection, True)
        if self.server.stopping.is_set():  # accepted just as stop() ran
            self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self):
        self.server._track(self.connection, False)
        super().finish()

    def do_HEAD(self):
        self.do_GET(head=True)

    def do_GET(self, head=False):
        srv = self.server
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        mode, _, rel = path.lstrip("/").partition("/")
        rng_header = self.headers.get("Range")
        file = os.path.join(srv.root, *rel.split("/"))
        if mode not in MODES or ".." in rel.split("/") or not os.path.isfile(file):
            return self._reply(mode, rel, 404, b"not found\n", head)
        if mode == "mute":  # the request is read, never answered
            with srv.lock:
                srv.requests.append({"mode": mode, "path": rel, "range": rng_header, "status": None})
            while not srv.stopping.wait(0.05):
                pass
            self.close_connection = True
            return
        # drop: the first Range answer per file is cut (a resumed request is not cut again)
        key = (self.command, mode, rel, None if mode == "drop" and rng_header else rng_header)
        with srv.lock:
            first = key not in srv.seen
            srv.seen.add(key)
        if mode == "always-500" or (mode == "flaky" and first):
            return self._reply(mode, rel, 500, b"injected failure\n", head)
        with open(file, "rb") as f:
            data = f.read()
        total = len(data)
        rng = _parse_range(rng_header, total) if mode != "ignore-range" else None
        if rng == "bad":
            return self._reply(mode, rel, 416, b"", head,
                               {"Content-Range": f"bytes */{total}"})
        if rng is None:
            return self._reply(mode, rel, 200, data, head)
        start, end = rng
        if mode == "bad-range":
            start, end = min(start + 1, total - 1), min(end + 1, total - 1)
        body = data[start:end + 1]
        if mode == "alter" and start > 0:
            body = bytearray(body)
            body[len(body) // 2] ^= 0xFF
            body = bytes(body)
        cut = mode == "drop-always" or (mode == "drop" and first)
        headers = {"Content-Range": f"bytes {start}-{end}/{srv.claim if mode == 'claim' else total}"}
        if mode == "new-etag":
            with srv.lock:
                srv.served += 1
                headers["ETag"] = f'"v{srv.served}"'
        self._reply(mode, rel, 206, body, head, headers, cut=cut)

    def _reply(self, mode, rel, status, body, head, headers=None, cut=False):
        srv = self.server
        ok = status in (200, 206)
        with srv.lock:
            srv.requests.append({"mode": mode, "path": rel,
                                 "range": self.headers.get("Range"), "status": status})
        self.send_response(status)
        if mode == "overlong" and status == 206:  # more than the range, no length to tell
            body += b"\0" * 4096
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if head:
            return
        if cut:  # half the body, then an abrupt close
            self.wfile.write(body[:len(body) // 2])
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif mode == "stall" and ok and body:
            self.wfile.flush()
            while not srv.stopping.wait(0.05):
                pass
            self.close_connection = True
        elif mode == "slow" and ok:
            for i in range(0, len(body), 256):
                if srv.stopping.is_set():
                    self.close_connection = True
                    return
                if i:
                    time.sleep(srv.slow_delay)
                self.wfile.write(body[i:i + 256])
        else:
            self.wfile.write(body)


class FaultServer(ThreadingHTTPServer):
    """Misbehaving static file server: ``GET|HEAD /<mode>/<path under root>``.

    ``ok``: 200 / single-range 206 (``a-b``, ``a-``, ``-n``) / 416 with
    ``Content-Range: bytes */N`` / 404; always Content-Length, never chunked.
    Multi-range or malformed Range headers are ignored (200).  Fault modes:

    ``ignore-range``  200 + whole file even for Range requests.
    ``drop``          first Range response per (method, mode, path): correct
                      206 headers, half the body, abrupt close; then normal
                      (so a client resuming where the body stopped succeeds).
    ``drop-always``   every 206 is cut like that.
    ``flaky``         first request per (method, mode, path, Range) gets 500.
    ``always-500``    every request gets 500.
    ``bad-range``     206 for the range shifted by +1 byte (clamped to EOF),
                      with a Content-Range that honestly describes it.
    ``alter``         206s with start > 0 have their middle byte XOR 0xFF.
    ``slow``          correct, body in 256-byte pieces ``slow_delay`` s apart.
    ``stall``         correct headers (200 or 206), then no body until stop().
    ``claim``         206s whose Content-Range claims the file is ``claim`` bytes.
    ``new-etag``      206s with a strong ETag that differs in every answer.
    ``overlong``      206s whose body goes on past the range, without Content-Length.
    ``mute``          the request is read and never answered (until stop()).

    ``requests`` lists {"mode", "path", "range", "status"} per request
    ("path" is relative to ``root``; "range" is the raw header or None).
    """

    daemon_threads = True
    block_on_close = False

    def __init__(self, root):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = os.path.abspath(os.fspath(root))
        self.port = self.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.slow_delay = 0.05
        self.claim = 2**62
        self.served = 0
        self.lock = threading.Lock()
        self.requests = []
        self.seen = set()
        self.stopping = threading.Event()
        self._conns = set()
        self._thread = None

    def _track(self, conn, add):
        with self.lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def reset(self):
        """Forget recorded requests and the drop/flaky "seen" memory."""
        with self.lock:
            self.requests.clear()
            self.seen.clear()

    def handle_error(self, request, client_address):
        pass  # client disconnects and aborted connections are expected here

    def start(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self.serve_forever, args=(0.05,),
                                            name="FaultServer", daemon=True)
            self._thread.start()
        return self

    def stop(self):
        """Stop promptly, even with stalled/slow handlers or idle keep-alives."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
        self.server_close()
        with self.lock:
            conns = list(self._conns)
        for c in conns:  # wake handlers blocked reading the next request
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------------------
_WERKZEUG = re.compile(r'"([A-Z]+) (\S+) HTTP/[0-9.]+" (\d{3})')


class S3Server:
    """moto's S3 server on ``127.0.0.1:<port>`` (a subprocess), stopped by ``stop()``."""

    KEY, SECRET, REGION = "testing", "testing", "us-east-1"

    def __init__(self):
        self.port = None
        self.url = None
        self._proc = None
        self._dir = None

    def start(self):
        import sys
        self._dir = tempfile.mkdtemp(prefix="rangetest-moto-")
        self.log_path = os.path.join(self._dir, "moto.log")
        atexit.register(self.stop)
        for _ in range(5):
            port = _free_port()
            with open(self.log_path, "ab") as log:
                self._proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              start_new_session=True)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self._proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    self.port, self.url = port, f"http://127.0.0.1:{port}"
                    return self
                except OSError:
                    time.sleep(0.05)
            self._terminate()
        self.stop()
        raise RuntimeError("moto.server failed to start (pip install 'moto[server]': the test extra has it)")

    def _terminate(self):
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self):
        self._terminate()
        atexit.unregister(self.stop)
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def storage_options(self):
        """What codec's ``storage_options=`` (s3fs's arguments) take to reach this server."""
        return {"key": self.KEY, "secret": self.SECRET, "endpoint_url": self.url,
                "skip_instance_cache": True}

    @property
    def env(self):
        """The standard environment that reaches it (the CLI's way)."""
        return {"AWS_ENDPOINT_URL": self.url, "AWS_ACCESS_KEY_ID": self.KEY,
                "AWS_SECRET_ACCESS_KEY": self.SECRET, "AWS_DEFAULT_REGION": self.REGION}

    def fs(self):
        """A fresh s3fs filesystem on this server (for the tests' own setup and checks)."""
        import s3fs
        return s3fs.S3FileSystem(**self.storage_options)

    def requests(self):
        """[(method, path, status)] of every request served so far (werkzeug's log)."""
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return [(m[1], m[2], int(m[3])) for m in map(_WERKZEUG.search, f) if m]

    def mark(self):
        return len(self.requests())

    def since(self, mark):
        time.sleep(0.05)  # (the log line is written after the answer)
        return self.requests()[mark:]


class PlainHttp:
    """``python -m http.server`` on 127.0.0.1 serving ``root`` (no Range support), a subprocess."""

    def __init__(self, root):
        self.root = os.path.abspath(os.fspath(root))
        self._proc = None
        self.url = None

    def start(self):
        import sys
        for _ in range(5):
            port = _free_port()
            self._proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                                           "--directory", self.root, str(port)], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self._proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    self.url = f"http://127.0.0.1:{port}"
                    return self
                except OSError:
                    time.sleep(0.05)
            self.stop()
        raise RuntimeError("python -m http.server failed to start")

    def stop(self):
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

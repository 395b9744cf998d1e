"""A minimal Range-capable HTTP server on 127.0.0.1 for ``modelcodec demo`` (a set read over
HTTP): static files, single ``Range: bytes=a-b`` requests."""
from __future__ import annotations

import contextlib
import os
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator


@contextlib.contextmanager
def serve(directory: str) -> Iterator[str]:
    """Serve ``directory`` over HTTP on 127.0.0.1 (single-range requests); yields the base URL."""
    srv = _QuietServer(("127.0.0.1", 0), _RangeHandler)
    srv.directory = os.path.abspath(directory)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        """A client that hangs up (its reads done) is not worth a traceback on the terminal."""
        import sys
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _RangeHandler(SimpleHTTPRequestHandler):
    """Static files with single ``Range: bytes=a-b`` support (the stdlib's server has none)."""
    protocol_version = "HTTP/1.1"

    def translate_path(self, path):
        self.directory = self.server.directory
        return super().translate_path(path)

    def send_head(self):
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        path = self.translate_path(self.path)
        if m is None or not os.path.isfile(path):
            return super().send_head()
        size = os.path.getsize(path)
        a, b = int(m[1]), min(int(m[2]), size - 1)
        if a > b:
            self.send_error(416)
            return None
        f = open(path, "rb")
        f.seek(a)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {a}-{b}/{size}")
        self.send_header("Content-Length", str(b - a + 1))
        self.end_headers()
        self._left = b - a + 1
        return f

    def copyfile(self, source, outputfile):
        left = getattr(self, "_left", None)
        if left is None:
            return super().copyfile(source, outputfile)
        while left > 0:
            buf = source.read(min(left, 1 << 16))
            if not buf:
                break
            outputfile.write(buf)
            left -= len(buf)

    def log_message(self, *args):
        pass

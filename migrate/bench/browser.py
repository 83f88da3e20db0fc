"""The page of `export --web` in a real browser, for bench's `browser` sides and the tests: a folder
served from 127.0.0.1 by a static file server, and headless Chromium (Debian's `chromium`
package) driven by Playwright (`pip install playwright`; its own browser download is not used).

`serve(folder, isolated)` serves a folder as any static server does, or with the two headers that
make a page cross-origin isolated (COOP `same-origin`, COEP `require-corp`): only then does the
browser give the page SharedArrayBuffer, and so LiteRT.js its threads.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import tempfile
import threading

from ssd_mobilenet.errors import RunError

# Debian's package installs it here; CHROMIUM overrides.
CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
# Flags for a headless run without a network beyond 127.0.0.1: no GPU, no background connections
# (each would be refused by a closed network, many at a time), no first-run or sync prompts.
FLAGS = ("--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync")
ISOLATION_HEADERS = {"Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp"}


class _Handler(http.server.SimpleHTTPRequestHandler):
    headers_to_add: dict = {}
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
                      ".onnx": "application/octet-stream", ".json": "application/json"}

    def end_headers(self):
        for name, value in self.headers_to_add.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format, *args):  # noqa: A002  (the base class's name)
        pass


@contextlib.contextmanager
def serve(folder: str, isolated: bool = False):
    """Yields the base URL (`http://127.0.0.1:PORT/`) of `folder` served on a free port of 127.0.0.1
    by Python's static file server in a thread; with `isolated`, every response carries
    `ISOLATION_HEADERS`."""
    handler = type("Handler", (_Handler,), {"headers_to_add": ISOLATION_HEADERS if isolated else {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=folder))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def chromium():
    """Yields a headless Chromium (Playwright's `Browser`) with a new empty profile, closed on exit.

    Raises:
      RunError: no Playwright, or no Chromium at `CHROMIUM`.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise RunError("the browser sides need Playwright: pip install playwright") from None
    if not os.path.isfile(CHROMIUM):
        raise RunError(f"{CHROMIUM}: no Chromium (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile, sync_playwright() as playwright:
        # A persistent context is the one way to give Chromium a profile folder of our own.
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=list(FLAGS), chromium_sandbox=False)
        try:
            yield context
        finally:
            context.close()


def open_page(context, url: str, timeout_s: float = 120.0):
    """A new tab of `context` at `url` once its model is loaded (`window.modelReady`); returns
    (page, pageInfo), or raises RunError with the page's own message."""
    page = context.new_page()
    page.set_default_timeout(timeout_s * 1000)
    page.goto(url)
    # Without app.js (a folder missing it) there is no modelReady, only the page's message.
    error = page.evaluate("() => window.modelReady ? window.modelReady.then(() => null, (e) => e.message)"
                          " : document.getElementById('message').textContent")
    if error is not None:
        page.close()
        raise RunError(f"{url}: {error}")
    return page, page.evaluate("() => window.pageInfo")

"""Web pages of `export --web` (and candidates with the same `window` interface) against the TF1
session, in one run: each page's in-browser latency per photo (on one thread, and on several where
the page is cross-origin isolated) and the TF1 session's on the same decoded photo, interleaved
round by round, and each page's download: its folder, and what one visit fetched.

A page's time is its own (`window.lastTiming`, `performance.now()` in the page): `model_ms` the
runtime's call on the uint8 photo (the file resizes it, as the TF1 graph does: the same work as
the TF1 session's run), `total_ms` with the photo's JPEG decoding. The TF1 session runs the
decoded photo (uint8 [1, H, W, 3]) in this process, with TensorFlow's default threads.
"""

from __future__ import annotations

import os
import time

import numpy as np
from ssd_mobilenet.detections import DETECTION_OUTPUTS


def folder_bytes(folder: str) -> dict:
    """{"files": count, "bytes": total, "gzip_bytes": total gzip -6 compressed (what a server that
    compresses sends), "by_file": {name: bytes}} of an `export --web` folder."""
    by_file = {name: os.path.getsize(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}
    return {"files": len(by_file), "bytes": sum(by_file.values()),
            "gzip_bytes": visit_bytes(folder, by_file)["gzip_bytes"], "by_file": by_file}


def visit_bytes(folder: str, names) -> dict:
    """{"files": count, "bytes": total, "gzip_bytes": total gzip -6 compressed, "names"} of the
    files `names` of `folder`: what one visit of its page downloads (`measure` records the names
    it fetched)."""
    from migrate.export.web import gzip_bytes
    names = sorted(set(names))
    return {"files": len(names), "bytes": sum(os.path.getsize(os.path.join(folder, name)) for name in names),
            "gzip_bytes": gzip_bytes(folder, names), "names": names}


def _summary(values) -> dict:
    v = np.asarray(values, np.float64)
    return {"median_ms": float(np.median(v)), "p10_ms": float(np.percentile(v, 10)),
            "p90_ms": float(np.percentile(v, 90)), "runs": int(len(v))}


def _open_pages(context, root: str, pages: dict, threads, fetched: dict, servers: list, say) -> dict:
    """{side label: (Playwright page, its `window.pageInfo`)}: each of `pages` ({name: folder},
    served under `root/<name>/`) opened once per entry of `threads`, by a server of its own
    (cross-origin isolated unless on one thread); `fetched[label]` gathers the folder's files that
    side's page downloaded (GETs of its own folder: the photo is outside it)."""
    from urllib.parse import urlparse

    from migrate.bench import browser
    by_url = {}  # {base URL of a page's folder: the set of its side}

    def record(request):
        url = urlparse(request.url)
        name = url.path.split("/")[1] if url.path.count("/") > 1 else ""
        seen = by_url.get(f"{url.scheme}://{url.netloc}/{name}/")
        # GETs only: the page's HEAD requests check files it may never download.
        if seen is not None and request.method == "GET" and not url.path.endswith("/"):
            seen.add(url.path[len(name) + 2:])
    for name, folder in pages.items():
        os.symlink(os.path.abspath(folder), os.path.join(root, name), target_is_directory=True)
    context.on("requestfinished", record)
    opened = {}
    for n in threads:
        isolated = n is None or n > 1
        server = browser.serve(root, isolated=isolated)
        base = server.__enter__()
        servers.append(server)
        for name in pages:
            seen = by_url[f"{base}{name}/"] = set()
            page, info = browser.open_page(context, f"{base}{name}/" + (f"?threads={n}" if n else ""))
            label = f"{name}, {info['threads']} thread{'s' if info['threads'] > 1 else ''}"
            opened[label] = (page, info)
            fetched[label] = seen
            say(f"page loaded: {label} ({info['runtime']}), cross-origin isolated {info['cross_origin_isolated']}")
    return opened


def measure(src: str, pages: dict, photo: str, threads=(1, None), warmup: int = 3, repeats: int = 30,
            progress=None) -> dict:
    """Latencies of `photo` on the page of each folder of `pages` ({name: `export --web` folder,
    or a prototype page with the same `window` interface}) for each of `threads` (None: the
    page's default once cross-origin isolated, `min(cores, 4)`) and on the TF1 graph of `src` (a
    TF1 model directory with frozen_inference_graph.pb), `repeats` interleaved rounds after
    `warmup`.

    Returns:
      dict: photo {name, height, width}, tf1_session (`_summary`), browser {label: `_summary` of
      model_ms, total (`_summary` of total_ms), page, threads, cross_origin_isolated, runtime},
      ratios {label: median model_ms / median TF1}, download {page name: `folder_bytes`},
      visit {label: `visit_bytes` of what that side's page fetched}, chromium (its user agent).
    """
    import shutil
    import tempfile

    import tensorflow as tf

    from migrate.bench import browser
    from migrate.tf1.frozen_graph import FrozenGraphRunner
    from migrate.tf1.sources import read_graph_def
    say = progress or (lambda msg: None)
    image = tf.io.decode_image(open(photo, "rb").read(), channels=3).numpy()[None]
    graph = read_graph_def(os.path.join(src, "frozen_inference_graph.pb"))
    tf1 = FrozenGraphRunner(graph)
    fetches = {k: f"{k}:0" for k in DETECTION_OUTPUTS}
    root = tempfile.mkdtemp(prefix="migrate-web-bench-")
    shutil.copy(photo, os.path.join(root, "photo" + os.path.splitext(photo)[1]))
    url = "../photo" + os.path.splitext(photo)[1]
    servers, fetched = [], {}
    try:
        with browser.chromium() as context:
            opened = _open_pages(context, root, pages, threads, fetched, servers, say)
            timings = {label: [] for label in opened}
            tf1_ms = []

            def run_page(page):
                page.evaluate("(url) => window.detect(url).then(() => document.getElementById('results')"
                              "?.replaceChildren())", url)
                return page.evaluate("() => window.lastTiming")

            for _ in range(warmup):
                tf1.run(image, fetches)
                for page, _ in opened.values():
                    run_page(page)
            for i in range(repeats):
                start = time.perf_counter()
                tf1.run(image, fetches)
                tf1_ms.append((time.perf_counter() - start) * 1000)
                for label, (page, _) in opened.items():
                    timings[label].append(run_page(page))
                if (i + 1) % 10 == 0:
                    say(f"round {i + 1} of {repeats}")
            version = next(iter(opened.values()))[0].evaluate("() => navigator.userAgent")
    finally:
        for server in servers:
            server.__exit__(None, None, None)
        tf1.close()
        shutil.rmtree(root, ignore_errors=True)
    tf1_summary = _summary(tf1_ms)
    out = {"photo": {"name": os.path.basename(photo), "height": int(image.shape[1]), "width": int(image.shape[2])},
           "tf1_session": tf1_summary, "browser": {}, "ratios": {},
           "download": {name: folder_bytes(folder) for name, folder in pages.items()},
           "visit": {label: visit_bytes(pages[label.split(", ")[0]], fetched[label]) for label in opened},
           "chromium": version, "repeats": repeats, "warmup": warmup}
    for label, (page, info) in opened.items():
        out["browser"][label] = {**_summary([t["model_ms"] for t in timings[label]]),
                                 "total": _summary([t["total_ms"] for t in timings[label]]),
                                 "page": label.split(", ")[0], "threads": info["threads"],
                                 "cross_origin_isolated": info["cross_origin_isolated"], "runtime": info["runtime"]}
        out["ratios"][label] = out["browser"][label]["median_ms"] / tf1_summary["median_ms"]
    return out

"""docs/benchmarks.md's FPN and PPN section: the rows of `scripts/bench.py --model fpn_640|ppn_300`'s
reports beside it, refreshed in place by each such run and kept by a run of the plain model; the
README's headline table, the published plain model's run."""

from __future__ import annotations

import json
import os

from migrate.bench import tables
from tests.conftest import REPO

DOCS = os.path.join(REPO, "docs")


def _row(side, size, batch, ms, ratio, ci, rss, rss_ratio):
    return {"side": side, "onednn": "default", "size": list(size), "batch": batch, "latency_ms": {"median": ms},
            "latency_ratio": ratio, "latency_ratio_ci95": ci, "peak_rss_bytes": rss * 2 ** 20, "rss_ratio": rss_ratio}


def _ppn_report():
    rows = [_row("tf1_session", (300, 300), 1, 40.0, 1.0, [1.0, 1.0], 900, 1.0),
            _row("tf1_session", (480, 640), 8, 400.0, 1.0, [1.0, 1.0], 900, 1.0),
            _row("saved_model", (300, 300), 1, 28.0, 0.7, [0.65, 0.75], 720, 0.8),
            _row("saved_model", (480, 640), 8, 260.0, 0.65, [0.6, 0.7], 720, 0.8),
            _row("tflite", (300, 300), 1, 26.0, 0.65, [0.6, 0.7], 108, 0.12)]
    cold = [{"side": side, "first_detections_s": s, "first_detections_s_ratio": s / 10.0,
             "peak_rss_bytes": m * 2 ** 20, "peak_rss_bytes_ratio": m / 850}
            for side, s, m in (("tf1_session", 10.0, 850), ("saved_model", 6.0, 650), ("tflite", 0.4, 120))]
    return {"onednn": ["default"], "sides": ["tf1_session", "saved_model", "tflite"], "rows": rows,
            "cold": {"rows": cold}}


def test_the_family_section_lists_each_side_beside_the_tf1_session_and_is_refreshed_in_place(tmp_path):
    page = tmp_path / "benchmarks.md"
    head, tail = "# Benchmarks\n\n## Results\n\n| a table |\n", "\n## Sides\n\n- `tf1_session`: ...\n"
    page.write_text(head + tail)
    assert tables.family_section(str(tmp_path)) == []
    assert tables.refresh_family_section(str(page)) and page.read_text() == head + tail  # no report: no section
    (tmp_path / "benchmarks_ppn_300.json").write_text(json.dumps(_ppn_report()))
    tables.refresh_family_section(str(page))
    text = page.read_text()
    assert text.startswith(head) and text.endswith(tail) and text.count(tables.FAMILY_HEADING) == 1
    rows = {line.split(" | ")[1]: line.split(" | ") for line in text.splitlines()
            if line.startswith("| [PPN 300x300](benchmarks_ppn_300.md)")}
    assert list(rows) == ["`tf1_session`", "`saved_model`", "`tflite`"]
    # batch 1 at 300x300 with its interval, batch 8 at 480x640, the warm peak RSS, the cold start
    assert rows["`saved_model`"][2:] == ["28.0", "0.70 (0.65-0.75)", "260.0", "0.65 (0.60-0.70)", "720.0", "0.80",
                                          "6.0", "0.60", "650", "0.76 |"]
    assert rows["`tflite`"][4:6] == ["-", "-"]  # no batch 8 for a file side
    assert rows["`tf1_session`"][3] == "1.00"
    # A second run replaces the section; without the reports it goes.
    tables.refresh_family_section(str(page))
    assert page.read_text() == text
    (tmp_path / "benchmarks_ppn_300.json").unlink()
    tables.refresh_family_section(str(page))
    assert page.read_text() == head + tail
    assert not tables.refresh_family_section(str(tmp_path / "missing.md"))


def test_the_readme_headline_table_is_the_published_run(tmp_path):
    """The README's headline table is `headline_table` of docs/benchmarks.json (the run
    `scripts/bench.py --publish` refreshes it from), and a refresh rewrites only that table."""
    report = json.load(open(os.path.join(DOCS, "benchmarks.json"), encoding="utf-8"))
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    table = readme.split(tables.HEADLINE_START + "\n", 1)[1].split("\n" + tables.HEADLINE_END, 1)[0]
    assert table == tables.headline_table(report)
    rows = table.splitlines()[2:]
    assert [r.split(" | ")[0] for r in rows[1:]] == [f"| {name}" for side, name in tables.HEADLINE_SIDES
                                                     if side in report["sides"]]
    copy = tmp_path / "README.md"
    copy.write_text(readme.replace(rows[1], "| stale | row |"))
    assert tables.refresh_headline(str(copy), report) and copy.read_text() == readme
    copy.write_text("no table here\n")
    assert not tables.refresh_headline(str(copy), report) and copy.read_text() == "no table here\n"

"""`%prime_harness show` fits a notebook: short ids, clipped names with tooltips, no empty
columns, one line per row, sideways scrolling instead of a cut-off last column."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import primenb.harness as h
from primenb.protocol.index import index_trace
from primenb.protocol.record import write_trace
from primenb.traces.table import CLIP, short_ids
from tests.harness.synth import make_doc

LONG = "reverse-text-qwen3-0.6b-lora-r16-lr3e-4-sweep-seed-"  # names of a sweep differ at the end
IDS = ["3fa9c0d1e2", "3fa9c0ffff", "7b00000000", "7b10000000", "c0ffee0001"]


def _write(home: Path, ids: list[str], *, name: Any = None) -> None:
    for i, tid in enumerate(ids):
        doc = make_doc(i)
        doc["trace_id"] = tid
        doc["parent"] = ids[i - 1] if i else None
        doc["name"] = name(i) if name else f"run-{i}"
        doc["adapter"] = None  # no LoRA anywhere: the column has nothing to say
        run_dir = home / "runs" / tid
        run_dir.mkdir(parents=True)
        write_trace(run_dir, doc)
        assert index_trace(doc, run_dir)


def test_short_ids_are_the_shortest_unique_prefixes() -> None:
    short = short_ids(IDS, IDS)
    assert short == {
        "3fa9c0d1e2": "3fa9c0d",
        "3fa9c0ffff": "3fa9c0f",
        "7b00000000": "7b00",
        "7b10000000": "7b10",
        "c0ffee0001": "c0ff",
    }
    both = ["abcd", "abcdef12"]
    assert short_ids(both, both) == {"abcd": "abcd", "abcdef12": "abcde"}  # never another's full id
    assert short_ids(["7b00000000"], IDS + ["7b0000ffff"]) == {"7b00000000": "7b00000"}  # among all ids


def test_every_short_id_shown_opens_its_trace(home: Path, shell: Any) -> None:
    _write(home, IDS)
    df = h.traces(last=2)  # a filtered view: ids stay unique among every trace, not the shown rows
    shown = df.attrs["short_ids"]
    for tid in df["trace"]:
        assert h.get(shown[tid]).id == tid
        result = shell.run_cell(f"%prime_harness show {shown[tid]}")
        assert result.success and result.result.id == tid
    assert list(df["trace"]) == ["c0ffee0001", "7b10000000"]  # the data keeps full ids


def test_text_table_uses_short_ids_clips_names_and_drops_empty_columns(home: Path) -> None:
    _write(home, IDS, name=lambda i: f"{LONG}{i}")
    text = repr(h.traces())
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["trace", "parent", "name"]
    assert "LoRA" not in lines[0]  # empty for every row
    assert re.match(r"c0ff\s+7b10\s+", lines[2])  # short ids, the parent too
    assert f"{LONG}4" not in text and "…" in text
    names = [n for n in re.findall(r"\S*…\S*", text)]
    assert len(names) == 5 and all(len(n) == CLIP["name"] for n in names)
    assert names[0].endswith("seed-4") and names[0].startswith("reverse-text")  # start and end kept
    assert all(line == line.rstrip() for line in lines)


def test_html_table_scrolls_sideways_keeps_rows_on_one_line_and_names_in_tooltips(home: Path) -> None:
    _write(home, IDS, name=lambda i: f"{LONG}{i}")
    html = h.traces()._repr_html_()
    assert re.search(r'<div style="overflow-x:auto[^"]*">\s*<table', html)  # scroll, not cut off
    cells = re.findall(r"<t[dh] style=\"([^\"]*)\"", html)
    assert cells and all("white-space:nowrap" in style for style in cells)  # one line per row
    for i in range(5):
        full = f"{LONG}{i}"
        assert f'title="{full}"' in html  # the full name on hover
        assert f">{full}<" not in html  # and a clipped one in the cell
    assert '<span title="3fa9c0d1e2">3fa9c0d</span>' in html  # a short id; the full one on hover
    assert ">LoRA<" not in html


def test_short_names_are_shown_whole_without_tooltips(home: Path) -> None:
    _write(home, IDS[:2])
    html = h.traces()._repr_html_()
    assert ">run-0<" in html and 'title="run-0"' not in html


def _only_in_titles(html: str, full: str) -> bool:
    """The full id appears, and only as a tooltip (the title of the span showing the short id)."""
    return f'title="{full}"' in html and full not in html.replace(f'title="{full}"', "")


def test_detail_diff_and_compare_views_show_the_tables_short_ids(home: Path) -> None:
    a, b, c = "3fa9c0d1e2", "3fa9c0ffff", "c0ffee0001"  # a and b share 6 characters
    for i, tid in enumerate([a, b, c, "7b00000000"]):
        doc = make_doc(i)
        doc["trace_id"], doc["name"] = tid, f"run-{i}"
        doc["parent"] = {b: a, c: b}.get(tid)
        run_dir = home / "runs" / f"run-{i}"  # a folder without the id, which the detail shows
        run_dir.mkdir(parents=True)
        (run_dir / "metrics.jsonl").write_text("".join(f'{{"step": {s}, "reward": {s / 10}}}\n' for s in (1, 2)))
        write_trace(run_dir, doc)
        assert index_trace(doc, run_dir)
    table = h.traces()._repr_html_()
    short = {a: "3fa9c0d", b: "3fa9c0f", c: "c0ff"}
    for tid, prefix in short.items():
        assert f'<span title="{tid}">{prefix}</span>' in table  # what the table shows

    views = {
        "detail": h.get(b)._repr_html_(),  # lineage a → b → c
        "diff": h.diff(a, b)._repr_html_(),  # b's parent is a: a row of the diff
        "compare": h.compare(a, b)._repr_html_(),
    }
    for name, html in views.items():
        for tid in (a, b):
            assert f'<span title="{tid}">{short[tid]}</span>' in html, (name, tid)
            assert _only_in_titles(html, tid), (name, tid)
    assert _only_in_titles(views["detail"], c) and f'<span title="{c}">c0ff</span>' in views["detail"]
    assert f">{short[a]} run-0</text>" in views["compare"]  # the chart legend: short id and name
    assert a in repr(h.diff(a, b)) and b in repr(h.compare(a, b))  # plain text keeps full ids


def test_an_id_shown_short_is_escaped_in_its_tooltip_and_cell() -> None:
    from primenb.traces.views import id_html

    hostile = 'ab"><script>x</script>'
    html = id_html(hostile, {hostile: 'ab"><'})
    assert html == '<span title="ab&quot;&gt;&lt;script&gt;x&lt;/script&gt;">ab&quot;&gt;&lt;</span>'
    assert id_html("abcd", {"abcd": "abcd"}) == "abcd"  # already as short as it gets: no tooltip

"""The sidebar's TypeScript types are generated from the typed run documents: no drift."""

from __future__ import annotations

from primenb.protocol.documents import INDEX_NAMES, State, json_schema
from primenb.protocol.tsgen import default_path, render


def test_generated_typescript_matches_the_documents() -> None:
    committed = default_path().read_text(encoding="utf-8")
    assert committed == render(), "run `python -m primenb.protocol.tsgen` and commit labextension/src/documents.ts"


def test_schema_exports_every_document_with_a_version() -> None:
    schema = json_schema()
    assert {"StatusDoc", "TraceDoc", "MetricRow", "SampleRow", "IndexRow", "ManifestDoc", "EvalDoc"} <= set(
        schema["$defs"]
    )
    assert set(schema["versions"]) == {"status", "trace", "manifest", "index", "eval"}
    assert schema["$defs"]["State"]["enum"] == [s.value for s in State]
    assert list(schema["$defs"]["IndexRow"]["properties"]) == list(INDEX_NAMES)

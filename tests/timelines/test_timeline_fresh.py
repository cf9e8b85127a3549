# The sequence diagrams of spec/ and docs/ are drawn from recorded traces
# (docs/traces/, docs/diagrams/); this fails when the runtime or the renderer has changed
# what the scenarios record or draw, and the committed files were not regenerated.
from __future__ import annotations

from support.timelines import SCENARIOS, outputs, record, regenerate

REGENERATE = ".venv/bin/python docs/diagrams.py"


def test_committed_traces_and_diagrams_match_a_fresh_recording() -> None:
    """Recording every scenario again gives the committed trace and SVG files, byte for
    byte; otherwise the message names the command that regenerates them."""
    stale = regenerate(check=True)

    assert [] == stale, f"stale timelines: {', '.join(stale)}; regenerate them with {REGENERATE}"


def test_a_scenario_records_the_same_trace_twice() -> None:
    """Two recordings of the drop-and-resume scenario give identical bytes: no random ids,
    no times, no scheduling order leak into the files."""
    [scenario] = [s for s in SCENARIOS if s.name == "drop-and-resume"]

    assert record(scenario) == record(scenario)


def test_the_docs_and_reattachment_md_embed_the_generated_diagrams() -> None:
    """The pages of docs/ show every scenario's SVG, spec/reattachment.md the
    drop-and-resume one, and no hand-drawn mermaid sequence diagram is left in
    spec/reattachment.md."""
    root = outputs(SCENARIOS[0])[1].parents[2]
    docs = "".join(p.read_text(encoding="utf-8") for p in sorted((root / "docs").glob("*.md")))
    reattachment = (root / "spec" / "reattachment.md").read_text(encoding="utf-8")

    for scenario in SCENARIOS:
        assert f"](diagrams/{scenario.name}.svg)" in docs, scenario.name
    assert "../docs/diagrams/drop-and-resume.svg" in reattachment
    assert "sequenceDiagram" not in reattachment
    for scenario in SCENARIOS:
        assert all(path.exists() for path in outputs(scenario)), scenario.name

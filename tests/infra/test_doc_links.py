"""The documentation's links: every one in the checkout leads somewhere, and a broken one
is found (file or heading)."""

from __future__ import annotations

from pathlib import Path

from infra import doc_links


def test_every_link_of_the_documentation_leads_somewhere():
    documents = [doc_links.ROOT / "README.md", *(doc_links.ROOT / "docs").glob("*.md")]
    assert [p for d in documents for p in doc_links.broken_links(d)] == []


def test_a_broken_file_or_heading_is_found(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(doc_links, "ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Failing over\n")
    document = tmp_path / "doc.md"
    document.write_text(
        "[ok](other.md#failing-over) [gone](missing.md) [bad](other.md#restoring) [web](https://x)"
    )
    assert doc_links.broken_links(document) == [
        "doc.md: missing.md: no such file",
        "doc.md: other.md#restoring: no such heading",
    ]


def test_slugs_are_githubs():
    assert doc_links.slug("Failing over") == "failing-over"
    assert doc_links.slug("`[relay]`") == "relay"
    assert doc_links.slug("How exactly-once is achieved") == "how-exactly-once-is-achieved"

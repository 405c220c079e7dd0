"""``make lint``: every relative link in the README and ``docs/`` leads somewhere — a file
of the checkout, and, with ``#anchor``, a heading of that file (GitHub's slugs)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#+ (.*)$", re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading. Pure."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def broken_links(document: Path) -> list[str]:
    problems = []
    text = document.read_text()
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        linked = (document.parent / path_part).resolve() if path_part else document
        if not linked.exists():
            problems.append(f"{document.relative_to(ROOT)}: {target}: no such file")
            continue
        if anchor and linked.suffix == ".md":
            anchors = {slug(h) for h in HEADING.findall(linked.read_text())}
            if anchor not in anchors:
                problems.append(f"{document.relative_to(ROOT)}: {target}: no such heading")
    return problems


def main() -> int:
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    problems = [p for d in documents for p in broken_links(d)]
    for problem in problems:
        sys.stderr.write(problem + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every shipped retrieval suite against bm25, the hybrid reference, and the embedded store with
each side alone and fused, side by side, with paired permutation tests against bm25.

For each shipped suite whose target is a built-in memory-benchmark target (retrieval, substring,
QA, scenarios), ``compare-targets`` runs the same cases once per retriever in a throw-away
history and this script prints one Markdown table per suite: every scorer's mean, and the
difference from bm25 with its significance (* p<0.05, ** p<0.01, *** p<0.001).

    .venv/bin/python bench/retrieval_suites.py [--limit N] [--suite NAME ...]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from evalloop.config import load_settings
from evalloop.retrieval.suite_compare import SUITE_TARGETS, TargetComparison, compare_targets
from evalloop.suites.lookup import discover_suites
from evalloop.suites.models import PACKAGE_FIXTURES, load_suite
from evalloop.verdicts.stats import stars

TARGETS = ("bm25", "hybrid", "memory[text_weight=0]", "memory[vector_weight=0]", "memory[similarity_floor=-1]",
           "memory")
NAMES = {"memory[text_weight=0]": "memory, dense side alone", "memory[vector_weight=0]":
         "memory, text side alone (FTS5 porter + stop words)", "memory": "memory (fused)",
         "memory[similarity_floor=-1]": "memory, fused without the similarity floor",
         "hybrid": "hybrid (calibrated)"}


def shipped_suites() -> list[str]:
    """The shipped memory-benchmark suites, one per dataset and target kind (``retrieval-bm25``,
    ``-hybrid`` and ``-memory`` differ only in the retriever this script replaces)."""
    found = discover_suites(PACKAGE_FIXTURES.parent)  # the shipped suites only
    seen: dict[tuple[str, str, str], str] = {}
    for name, path in sorted(found.items()):
        suite = load_suite(path)
        if suite.target.ref.startswith(SUITE_TARGETS):
            rest = {k: v for k, v in suite.target.params.items() if k != "retriever"}
            seen.setdefault((str(suite.dataset_dir), suite.target.ref, repr(sorted(rest.items()))), name)
    return sorted(seen.values())


def table(result: TargetComparison) -> str:
    lines = [f"**{result.suite}** ({result.n_cases} cases; reference bm25)", "",
             "| target | " + " | ".join(result.scorers) + " |", "|---|" + "---|" * len(result.scorers)]
    for r in result.results:
        cells = []
        for s in result.scorers:
            mean, diff = r.means.get(s), r.vs_reference.get(s)
            text = "—" if mean is None else f"{mean:.3f}"
            if diff is not None and diff.p_value is not None:
                text += f" ({diff.diff:+.3f}{stars(diff.p_value)})"
            cells.append(text)
        lines.append(f"| {NAMES.get(r.target, r.target)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N cases per suite")
    parser.add_argument("--suite", nargs="*", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(Path(tmp))
        for name in args.suite or shipped_suites():
            print(table(compare_targets(name, TARGETS, settings=settings, limit=args.limit)) + "\n")


if __name__ == "__main__":
    main()

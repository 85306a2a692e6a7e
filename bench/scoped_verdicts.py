"""A run's verdict on scoped suites, cases as independent (before) beside whole scopes (after).

For the shipped ``retrieval-conversations`` suite (6 conversations) and a LoCoMo-format suite
made here (``generate_conversations(10, seed=11)`` imported as ``bench import locomo`` does),
the store (``memory``) is run once as the baseline, then three "current" runs are judged
against it: the real pipeline's second run with bm25 instead of the store, and two drops
planted in the store's own scores: a uniform one (every question loses its score with
probability 0.2) and a concentrated one (two conversations lose theirs with probability 0.6).
Printed side by side: the width of the mean's 95 % CI (and, in brackets, the cluster bootstrap's
own width before it is widened to at least the one over cases), the drop's p-value and lower
bound, and the verdict, cases as independent vs by scope.

    .venv/bin/python bench/scoped_verdicts.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from evalloop.config import load_settings
from evalloop.history.store import HistoryStore
from evalloop.history.strata import case_scopes
from evalloop.loop.pipeline import run_suite
from evalloop.retrieval.conversations import generate_conversations
from evalloop.suites.lookup import find_suite
from evalloop.suites.models import TargetRef
from evalloop.verdicts.stats import bootstrap_ci
from evalloop.verdicts.verdict import VerdictPolicy, decide

SCORERS = ("hit@10", "ndcg@10")
POLICY = VerdictPolicy(threshold=0.10)


def _runs(project: Path, suite_ref: str) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]],
                                                  dict[str, str]]:
    """The store's and bm25's per-case scores (scorer → case → score) and the cases' scopes."""
    settings = load_settings(project).model_copy(update={"run_log": False, "learn": False})
    suite = find_suite(suite_ref, project)

    def aimed(retriever: str):  # the same suite (one history, one baseline) with another retriever
        return suite.model_copy(update={"target": TargetRef(
            ref=suite.target.ref, params={**suite.target.params, "retriever": retriever})})

    first = run_suite(aimed("memory"), settings=settings)
    second = run_suite(aimed("bm25"), settings=settings)
    store = HistoryStore(settings.database_url)
    pick = lambda run_id: {s: store.case_scores(run_id, s) for s in store.summaries(run_id)  # noqa: E731
                           if s in SCORERS}
    return pick(first.executed.run.id), pick(second.executed.run.id), case_scopes(store, second.executed.run.id)


def _planted(base: dict[str, float], scopes: dict[str, str], how: str, seed: int = 3) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    hit = sorted(set(scopes.values()))[:2]
    out = {}
    for c, v in sorted(base.items()):
        p = 0.2 if how == "uniform" else (0.6 if scopes[c] in hit else 0.0)
        out[c] = 0.0 if rng.random() < p else v
    return out


def _row(label: str, current: dict[str, float], window: list[dict[str, float]], scopes: dict[str, str]) -> str:
    before = decide(current, window, POLICY)
    after = decide(current, window, POLICY, scopes=scopes)

    def width(v) -> str:
        return "—" if v.ci_low is None else f"{v.ci_high - v.ci_low:.3f}"

    def low(v) -> str:
        return "—" if v.drop_ci_low is None else f"{100 * v.drop_ci_low:.1f}%"

    def p(v) -> str:
        return "—" if v.p_value is None else f"{v.p_value:.2g}"

    drop = "—" if after.drop is None else f"{100 * after.drop:.1f}%"
    ids = sorted(current)
    alone = bootstrap_ci([current[c] for c in ids], clusters=[scopes[c] for c in ids], seed=POLICY.seed)
    raw = "—" if alone is None else f"{alone.high - alone.low:.3f}"
    return (f"| {label} | {drop} | {width(before)} → {width(after)} ({raw}) | {p(before)} → {p(after)} | "
            f"{low(before)} → {low(after)} | {before.status} → {after.status} |")


def measure(project: Path, suite_ref: str, title: str) -> None:
    memory, bm25, scopes = _runs(project, suite_ref)
    print(f"\n**{title}** ({len(scopes)} cases, {len(set(scopes.values()))} scopes; threshold "
          f"{POLICY.threshold:.0%}; cases as independent → by scope)\n")
    print("| current run | drop | 95% CI width (scopes alone) | p | drop's 95% lower bound | verdict |")
    print("|---|---|---|---|---|---|")
    for s in SCORERS:
        base = memory[s]
        print(_row(f"{s}: the store again (no change)", base, [base], scopes))
        print(_row(f"{s}: bm25 instead of the store", bm25[s], [base], scopes))
        print(_row(f"{s}: planted, uniform (20% of questions)", _planted(base, scopes, "uniform"), [base], scopes))
        print(_row(f"{s}: planted, 2 conversations (60% of theirs)", _planted(base, scopes, "two"), [base],
                   scopes))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="evalloop-scoped-") as tmp:
        root = Path(tmp)
        (root / "shipped").mkdir()
        measure(root / "shipped", "retrieval-conversations", "retrieval-conversations (shipped)")
        made = root / "made"
        made.mkdir()
        (made / "c.json").write_text(json.dumps(generate_conversations(10, seed=11)))
        subprocess.run([str(Path(sys.executable).parent / "evalloop"), "bench", "import", "locomo", "c.json",
                        "--out", "fixtures/locomo"], cwd=made, check=True, capture_output=True)
        measure(made, str(made / "fixtures" / "locomo.yaml"), "LoCoMo-format, 10 generated conversations (seed 11)")


if __name__ == "__main__":
    main()

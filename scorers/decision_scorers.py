"""This repository's own project scorers: every @scorer in scorers/*.py is discovered at run time."""

from evalloop import Score, scorer


@scorer("reason-is-short", kind="heuristic", threshold=0.10)
def reason_is_short(input, output, expected, max_words: int = 12) -> Score:
    """A decision's reason is one short sentence (at most max_words words)."""
    reason = str((output or {}).get("reason", "")) if isinstance(output, dict) else ""
    words = len(reason.split())
    if not reason:
        return Score(value=0.0, message="no reason given")
    ok = words <= max_words
    return Score(value=float(ok), message=f"{words} words" + ("" if ok else f" > {max_words}"))

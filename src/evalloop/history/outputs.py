"""A case's stored output: at most ``max_output_bytes`` of it, its full size and hash kept.

A target's output is stored as JSON text (``case_results.output``). Past the cap (the setting
``max_output_bytes``, 1,000,000 by default; 0 for none) the history keeps the first bytes of that
text, cut on a character boundary — no longer JSON itself — with the whole text's size in bytes
(``output_bytes``, set only for a truncated output) and its SHA-256 (``output_sha256``), so two
runs' outputs can still be told equal or not. The scorers grade the whole output; only what is
stored is cut. :func:`truncation_note` is how ``show`` and the reports say so.
"""

from __future__ import annotations

import hashlib

__all__ = ["cap_output", "truncation_note"]


def cap_output(text: str, limit: int | None) -> tuple[str, int | None, str | None]:
    """``(stored, full size in bytes, SHA-256)`` of an output's JSON text: the text itself and two
    Nones when it fits in ``limit`` bytes (or there is no limit), else its first ``limit`` bytes."""
    if not limit or len(text) <= limit // 4:  # 4 bytes a character at most: fits, without encoding
        return text, None, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, None, None
    head = data[:limit].decode("utf-8", "ignore")  # a character cut in two is left out
    return head, len(data), hashlib.sha256(data).hexdigest()


def truncation_note(stored: str | None, full_bytes: int | None, sha256: str | None) -> str | None:
    """One line for a truncated output (None when it was stored whole)."""
    if full_bytes is None:
        return None
    kept = len((stored or "").encode("utf-8", "surrogatepass"))
    return f"truncated: {kept:,} of {full_bytes:,} bytes stored (sha256 {(sha256 or '?')[:16]}…)"

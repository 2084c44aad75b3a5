"""Long documents in model-sized windows: split on word-piece boundaries, each window's character span.

A text longer than the model reads is cut silently by the model; a caller that wants all of it
embedded needs windows the model can read, overlapping so that a sentence across a boundary is
whole in one of them, and the span of each in the original text (to show, highlight or cite it).
The windows are computed on the model's own tokenizer's word pieces, so each holds at most the
tokens asked for; the span runs from its first piece's first character to its last piece's last.
"""

from __future__ import annotations


def windows(count: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Word-piece index ranges [first, last) of at most `size` pieces covering `count` pieces in order,
    each starting `size - overlap` after the one before; the last one ends at the last piece."""
    if count <= 0:
        return []
    if not 0 <= overlap < size:
        raise ValueError(f"overlap {overlap} must be from 0 to size - 1 ({size - 1})")
    ranges = []
    first = 0
    while True:
        last = min(first + size, count)
        ranges.append((first, last))
        if last == count:
            return ranges
        first += size - overlap


def spans(pieces: list[tuple[int, int]], size: int, overlap: int) -> list[tuple[int, int]]:
    """The character spans [start, end) of the windows over `pieces` (each piece's own span)."""
    return [(pieces[first][0], pieces[last - 1][1]) for first, last in windows(len(pieces), size, overlap)]

"""Sets of positive numbers as sorted disjoint [low, high] ranges (shapes.RANGES is their shape)."""

from __future__ import annotations

from bisect import bisect_right


def has(ranges: list[list[int]], n: int) -> bool:
    i = bisect_right(ranges, n, key=lambda r: r[0])
    return i > 0 and ranges[i - 1][1] >= n


def add(ranges: list[list[int]], n: int) -> bool:
    """Put `n` in the set; False if it was there."""
    if ranges and ranges[-1][1] == n - 1:  # the usual case: the next turn of a session
        ranges[-1][1] = n
        return True
    i = bisect_right(ranges, n, key=lambda r: r[0])  # ranges[:i] start at or before n
    if i > 0 and ranges[i - 1][1] >= n:
        return False
    joins_left = i > 0 and ranges[i - 1][1] == n - 1
    joins_right = i < len(ranges) and ranges[i][0] == n + 1
    if joins_left and joins_right:
        ranges[i - 1][1] = ranges[i][1]
        del ranges[i]
    elif joins_left:
        ranges[i - 1][1] = n
    elif joins_right:
        ranges[i][0] = n
    else:
        ranges.insert(i, [n, n])
    return True


def first_common(a: list[list[int]], b: list[list[int]], low: int) -> int | None:
    """The least number at or above `low` in both sets, or None."""
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0], low)
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            return lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return None

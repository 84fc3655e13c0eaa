"""Slot masks and groups: how filters and scope reach every channel before scoring (R4, R25),
and how a ranking of chunks becomes one of documents."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


def narrow(mask: BoolArray, allowed: BoolArray | None) -> BoolArray:
    """``mask & allowed``, where ``allowed`` may be shorter or longer than ``mask``; ``None``
    allows everything."""
    if allowed is None:
        return mask
    narrowed = np.zeros(mask.shape[0], dtype=bool)
    overlap = min(mask.shape[0], allowed.shape[0])
    narrowed[:overlap] = allowed[:overlap]
    return mask & narrowed


def first_per_group(ranked_slots: list[int], groups: IntArray) -> list[int]:
    """Positions in ``ranked_slots`` of the best (first) slot of each group, in rank order."""
    if not ranked_slots:
        return []
    _, firsts = np.unique(groups[np.asarray(ranked_slots, dtype=np.int64)], return_index=True)
    return sorted(firsts.tolist())

"""Slot masks: how filters and scope reach every channel before scoring (R4, R25)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]


def narrow(mask: BoolArray, allowed: BoolArray | None) -> BoolArray:
    """``mask & allowed``, where ``allowed`` may be shorter or longer than ``mask``; ``None``
    allows everything."""
    if allowed is None:
        return mask
    narrowed = np.zeros(mask.shape[0], dtype=bool)
    overlap = min(mask.shape[0], allowed.shape[0])
    narrowed[:overlap] = allowed[:overlap]
    return mask & narrowed

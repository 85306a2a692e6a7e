"""The array types the verdict modules share, named for what they hold.

numpy's bare ``np.ndarray`` means ``ndarray[Any, dtype[Any]]``; these say the element type, so
``verdicts/`` type-checks with no explicit ``Any`` (``disallow_any_explicit`` in pyproject.toml).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: scores: per case, or per case × run (NaN where a run has no grade); also differences and densities
Floats = npt.NDArray[np.float64]
#: per row, whether the case is in (a row mask)
Mask = npt.NDArray[np.bool_]
#: per row, a whole number: a scope's code (−1: none), a count, or row positions
Ints = npt.NDArray[np.int64]

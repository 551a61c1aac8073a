"""Seeds derived from (run seed, participant) so a lane's randomness is its own."""
from __future__ import annotations

import numpy as np


def derive_seed(*keys: int) -> int:
    """A 32-bit seed that depends on every key and on nothing else."""
    return int(np.random.SeedSequence([int(k) for k in keys]).generate_state(1)[0])

# TEMPORARY SHIM while the core is being written: re-exports torch's implementation.
from torch.nn.utils.prune import *  # noqa: F403
from torch.nn.utils.prune import (  # noqa: F401
    _compute_nparams_toprune,
    _validate_pruning_amount,
    _validate_pruning_amount_init,
)

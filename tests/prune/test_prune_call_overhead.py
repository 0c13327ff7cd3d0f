"""The fixed cost of a pruning call, counted: Python function calls against torch's.

A model pruned layer by layer pays a call's fixed cost once per layer, and on a tiny weight that
cost is the host time (``benchmarks/bench_launches.py --host`` times it; no unit test times
anything). What it is made of can be counted: the Python functions a call runs and the builtins
it calls, ours against ``torch.nn.utils.prune`` in the same process. Every check and the
all-or-nothing install stay; the bound keeps new layers from creeping into the common path.

Counted in a fresh interpreter: what other tests import changes a call's route (e.g. once FSDP2
is imported the core tells it about renamed parameters).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import torch

from prune_explorer import prune

#: How many more Python functions and builtin calls ours may run than torch's, per call.
EXTRA_FUNCTIONS = 10
EXTRA_BUILTINS = 0

_COUNT = textwrap.dedent('''
    import json, sys
    import torch
    import torch.nn.utils.prune as torch_prune
    from torch import nn
    from prune_explorer import prune

    SETTINGS = {
        "l1_unstructured": {"amount": 0.5},
        "random_unstructured": {"amount": 0.5},
        "ln_structured": {"amount": 0.5, "n": 2, "dim": 0},
        "random_structured": {"amount": 0.5, "dim": 0},
        "custom_from_mask": {"mask": torch.ones(16, 16)},
    }

    def calls_of(call):
        call(nn.Linear(16, 16))  # what a process does once is not a call's own
        layer = nn.Linear(16, 16)
        counts = [0, 0]

        def profile(frame, event, arg):
            if event == "call":
                counts[0] += 1
            elif event == "c_call":
                counts[1] += 1

        sys.setprofile(profile)
        try:
            call(layer)
        finally:
            sys.setprofile(None)
        return counts

    out = {}
    for method, kw in SETTINGS.items():
        theirs = calls_of(lambda m: getattr(torch_prune, method)(m, "weight", **kw))
        ours = calls_of(lambda m: getattr(prune, method)(m, "weight", **kw))
        out[method] = {"torch": theirs, "ours": ours, "grad": torch.is_grad_enabled()}
    print(json.dumps(out))
''')


def test_a_first_pruning_runs_about_torchs_python():
    done = subprocess.run([sys.executable, "-c", _COUNT], capture_output=True, text=True,
                          check=True, timeout=300)
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(counts) == {"l1_unstructured", "random_unstructured", "ln_structured",
                           "random_structured", "custom_from_mask"}
    for method, c in counts.items():
        (theirs_py, theirs_c), (ours_py, ours_c) = c["torch"], c["ours"]
        assert min(theirs_py, ours_py) > 10, (method, c)  # the profile saw the calls
        assert ours_py <= theirs_py + EXTRA_FUNCTIONS, (method, c)
        assert ours_c <= theirs_c + EXTRA_BUILTINS, (method, c)
        assert c["grad"], method  # autograd is the caller's again


def test_the_fresh_install_recognises_the_base_pruned_copy():
    # _module._install_fresh takes the container's apply_mask for the base class's
    assert prune.PruningContainer.apply_mask is prune.BasePruningMethod.apply_mask
    assert torch.is_grad_enabled()

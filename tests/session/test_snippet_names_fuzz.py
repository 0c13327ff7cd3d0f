"""Issue 36, item 6: every exported snippet parses and runs, whatever the parameter's name.

Hypothesis draws parameter names (Unicode, keywords, leading digits, quotes, backslashes, spaces,
``#``...); a model holds two tie-heavy bf16 tensors of that name (more entries than the core's
``SMALL``, rows all alike, few distinct values), so every L1, ``ln_structured``, random and global
step splits ties at its cut and the snippet spells the tie-broken call and its dtype line. Every
method is applied; the plan's snippet must compile and, run on stock ``torch.nn.utils.prune``
(in this process: the snippet imports only torch), leave the session's state_dict exactly.
"""

from __future__ import annotations

import copy
import keyword

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torch import nn

from helpers.snippet_replay import assert_same_state_dict
from prune_explorer.session import Session

SPECIAL = [*keyword.kwlist, "1w", "w-1", "w 1", "ｗeight", "é😀", "'", '"', '"""', "\\", "#",
           "a#b", "{model}", "%s", "__import__", "model", "module", "torch", "prune"]
NAMES = st.one_of(
    st.sampled_from(SPECIAL),
    st.text(alphabet=st.sampled_from("aZ_09é😀ｗ λ'\"\\#-+.()[]{}:\u2028\x00"), min_size=1,
            max_size=6),
)


def _model(name: str) -> nn.Module:
    g = torch.Generator().manual_seed(0)
    row = torch.round(torch.randn(520, generator=g) * 4) / 4
    weight = row.repeat(256, 1).to(torch.bfloat16)  # 133,120 entries, every row alike
    model = nn.Module()
    for holder, scale in (("h", 1.0), ("o", 2.0)):
        module = nn.Module()
        module.register_parameter(name, nn.Parameter(weight * scale))
        setattr(model, holder, module)
    return model


def _prune_with_every_method(s: Session, name: str) -> None:
    h, o = f"h.{name}", f"o.{name}"
    s.apply(h, "l1_unstructured", amount=0.3)
    s.apply(h, "ln_structured", amount=0.25, n=1, dim=0)
    s.apply(h, "random_unstructured", amount=0.2)
    s.apply(h, "random_structured", amount=0.1, dim=1)
    s.apply(o, "semi_structured", pattern="1:2", dim=1)
    s.apply(o, "block_structured", amount=0.2, block=(4, 4), n=1)
    s.apply(o, "custom_from_mask", mask=torch.rand(256, 520, generator=torch.Generator()
                                                   .manual_seed(1)) > 0.1)
    s.apply_global([h, o], "l1_unstructured", amount=0.3)
    s.apply_global([h, o], "random_unstructured", amount=0.1)
    s.apply(h, "identity")


@pytest.mark.slow
@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=NAMES)
def test_the_snippet_parses_and_runs_for_any_parameter_name(name):
    try:
        original = _model(name)
    except (KeyError, TypeError):  # a name torch refuses (a dot, an existing attribute)
        assume(False)
    s = Session(copy.deepcopy(original))
    _prune_with_every_method(s, name)
    assert any(step.ties for step in s.steps), "no step split a tie: the case tests nothing"
    source = s.plan.to_snippet()
    code = compile(source, "snippet", "exec")  # a SyntaxError fails here
    replayed = copy.deepcopy(original)
    exec(code, {"model": replayed})
    assert_same_state_dict(replayed.state_dict(), s.model.state_dict())


def test_the_dtype_line_of_a_tie_broken_step_sets_an_odd_name_with_setattr():
    s = Session(_model("w-1"))
    s.apply("h.w-1", "l1_unstructured", amount=0.3)
    assert s.steps[0].ties
    source = s.plan.to_snippet()
    compile(source, "snippet", "exec")
    assert 'setattr(module, "w-1_mask", getattr(module, "w-1_mask").to(' in source

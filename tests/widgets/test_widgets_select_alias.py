"""``Explorer.select`` takes an alias of a tied tensor, as the session does (GPT-2's
``lm_head.weight`` chooses ``transformer.wte.weight``)."""

from __future__ import annotations

import pytest

from helpers import hf_models
from prune_explorer.widgets import Explorer
from prune_explorer.widgets.errors import WidgetInputError


def test_select_an_alias_chooses_the_tensor_it_names():
    ex = Explorer(hf_models.gpt2(), debounce=None)
    try:
        ex.select("lm_head.weight")
        assert ex.ui.tensor.value == "transformer.wte.weight"
        with pytest.raises(WidgetInputError, match=r"'lm_head.bias' is not a prunable tensor"):
            ex.select("lm_head.bias")
    finally:
        ex.close()

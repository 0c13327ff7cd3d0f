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


def test_an_int8_weight_is_refused_by_the_explorer_in_the_sessions_words():
    up = "model.layers.0.mlp.up_proj.weight"
    with pytest.warns(UserWarning, match="left out 1 tensor"):
        ex = Explorer(hf_models.int8_llama(), debounce=None)
    try:
        assert ex.ui.tensor.value != up  # not the default tensor
        ex.select(up)
        ex.apply()
        assert f"cannot prune '{up}': its dtype is torch.int8" in ex.status.text
        assert ex.session.steps == ()
    finally:
        ex.close()

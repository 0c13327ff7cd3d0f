"""Issue 23, must-hold 5: a refused mask upload is not kept, a valid 0/1 mask of any integer or
float dtype is accepted, and no widget callback raises.

Driven as a user would (``debounce=None``): upload a file, choose "custom mask", click Apply.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from test_widgets_controls import npy, pt, upload

from helpers.widgets import assert_same_state, mlp, state
from prune_explorer.widgets import Explorer
from prune_explorer.widgets.errors import WidgetInputError

MASK = torch.arange(96).reshape(8, 12) % 4 != 0  # the shape of mlp()'s '0.weight'


def _quantized() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(MASK.float(), 1.0, 0, torch.qint8)


def _csr() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MASK.float().to_sparse_csr()


def _nested() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([row.float() for row in MASK])


VALID = {
    **{f"npy-{d}": ("mask.npy", lambda d=d: npy(MASK.numpy().astype(d)))
       for d in ("uint16", "uint32", "uint64", ">i4", "float16")},
    **{f"pt-{d}": ("mask.pt", lambda d=d: pt(MASK.to(getattr(torch, d))))
       for d in ("uint16", "uint32", "uint64", "float8_e4m3fn", "int8")},
}

REFUSED = {
    "pt-quantized": lambda: pt(_quantized()),
    "pt-sparse-coo": lambda: pt(MASK.float().to_sparse()),
    "pt-sparse-csr": lambda: pt(_csr()),
    "pt-meta": lambda: pt(torch.empty(8, 12, device="meta")),
    "pt-nested": lambda: pt(_nested()),
    "pt-complex": lambda: pt(MASK.to(torch.complex64)),
}


def _explorer(**kwargs) -> Explorer:
    return Explorer(mlp(), debounce=None, **kwargs)


@pytest.mark.parametrize("case", list(VALID))
def test_a_valid_mask_of_any_integer_or_float_dtype_is_accepted(case):
    filename, content = VALID[case]
    ex = _explorer()
    ex.ui.method.value = "custom_from_mask"
    upload(ex, filename, content())
    assert ex.status.kind == "ok", ex.status.text
    assert "(72 of 96 kept)" in ex.status.text
    assert torch.equal(ex.custom_masks["0.weight"] != 0, MASK)
    ex.ui.apply.click()
    assert ex.status.kind == "ok", ex.status.text
    assert torch.equal(ex.session.model[0].weight_mask != 0, MASK)
    assert ex.session.model[0].weight_mask.dtype == torch.float32
    ex.close()


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
@pytest.mark.parametrize("before", [None, torch.ones(8, 12)], ids=["no-mask", "a-mask"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_upload_is_not_kept_and_nothing_raises(case, before):
    ex = _explorer(custom_masks={} if before is None else {"0.weight": before})
    model_before = state(ex.session.model)
    ex.ui.method.value = "l1_unstructured"
    upload(ex, "mask.pt", REFUSED[case]())
    assert ex.status.kind == "error"
    assert ex.status.text.startswith("Upload custom mask failed: custom mask upload: file "
                                     "'mask.pt' must hold a dense tensor of 0/1 values")
    if before is None:
        assert "0.weight" not in ex.custom_masks
    else:
        assert torch.equal(ex.custom_masks["0.weight"], before)
    # choosing "custom mask" and clicking Apply: no callback raises, and only a kept mask applies
    ex.ui.method.value = "custom_from_mask"
    ex.ui.apply.click()
    if before is None:
        assert ex.status.kind == "error"
        assert "no mask was given for '0.weight'" in ex.status.text
        assert_same_state(ex.session.model, model_before)
    else:
        assert ex.status.kind == "ok", ex.status.text
        assert torch.equal(ex.session.model[0].weight_mask, before)
    ex.close()


def test_masks_given_from_code_get_the_same_treatment():
    ex = _explorer(custom_masks={"0.weight": MASK.to(torch.uint32)})
    ex.ui.method.value = "custom_from_mask"
    assert "keeps 72 of 96" in ex.ui.custom.value
    ex.set_custom_mask("0.weight", MASK.to(torch.uint64))
    ex.ui.apply.click()
    assert torch.equal(ex.session.model[0].weight_mask != 0, MASK)
    with pytest.raises(WidgetInputError, match=r"mask must be a dense tensor of 0/1 values .*got "
                                               r"a sparse \(torch.sparse_coo\) tensor"):
        ex.set_custom_mask("0.weight", MASK.float().to_sparse())
    assert torch.equal(ex.custom_masks["0.weight"] != 0, MASK)
    ex.close()


def test_a_message_that_cannot_be_worded_does_not_raise_out_of_a_callback():
    ex = _explorer()
    assert ex.act("Something", lambda _: 1, done=lambda result: str(1 // 0)) == 1
    assert ex.status.kind == "ok"
    assert ex.status.text == "Something: done"
    ex.close()


def test_upload_of_a_big_endian_array_is_read_by_value():
    ex = _explorer()
    ex.ui.method.value = "custom_from_mask"
    upload(ex, "mask.npy", npy(MASK.numpy().astype(">f8")))
    assert ex.status.kind == "ok", ex.status.text
    assert torch.equal(ex.custom_masks["0.weight"] != 0, MASK)
    assert np.dtype(">f8").byteorder == ">"
    ex.close()

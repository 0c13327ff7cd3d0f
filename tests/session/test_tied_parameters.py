"""Tied parameters on real ``transformers`` models (built from small configs, no download).

GPT-2's ``lm_head.weight`` *is* ``transformer.wte.weight``; T5 holds one matrix under four names;
BERT ties its decoder weight and bias; Llama with ``tie_word_embeddings=True`` its head. A tied
parameter is one tensor: listed and counted once, pruned once with every alias seeing the same
mask (forward and state_dict), committed without changing the model's outputs, and undone back to
the tie. The oracle for the values is the model with the shared parameter multiplied by the mask.
"""

from __future__ import annotations

import copy
import inspect
import re
import sys
import uuid
from pathlib import Path

import pytest
import torch
import torch.nn.utils.prune as torch_prune
import transformers as T  # in the test extras: these tests run in the normal suite
from torch import nn

from prune_explorer import Session, cli
from prune_explorer import prune as pe_prune
from prune_explorer.session import Plan, Step
from prune_explorer.session.model.state_dict import StateDictMismatchError, load_pruned_state_dict

T.logging.set_verbosity_error()

VOCAB = 97


def gpt2() -> nn.Module:
    import torch  # the CLI test writes this function into a module of its own
    import transformers as T

    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=32,
                       bos_token_id=0, eos_token_id=0)
    return T.GPT2LMHeadModel(cfg).eval()


def t5() -> nn.Module:
    torch.manual_seed(0)
    cfg = T.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=2,
                     decoder_start_token_id=0, tie_word_embeddings=True)
    return T.T5ForConditionalGeneration(cfg).eval()


def bert() -> nn.Module:
    torch.manual_seed(0)
    cfg = T.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    return T.BertForMaskedLM(cfg).eval()


def llama() -> nn.Module:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=2, intermediate_size=64,
                        tie_word_embeddings=True, bos_token_id=0, eos_token_id=0)
    return T.LlamaForCausalLM(cfg).eval()


BUILDERS = {"gpt2": gpt2, "t5": t5, "bert": bert, "llama": llama}
TIED = {  # the first name in module order, then its aliases
    "gpt2": {"transformer.wte.weight": ("lm_head.weight",)},
    "t5": {"shared.weight": ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
                             "lm_head.weight")},
    "bert": {"bert.embeddings.word_embeddings.weight": ("cls.predictions.decoder.weight",),
             "cls.predictions.bias": ("cls.predictions.decoder.bias",)},
    "llama": {"model.embed_tokens.weight": ("lm_head.weight",)},
}
IDS = torch.arange(12).reshape(1, 12) * 7 % VOCAB


def logits(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        if isinstance(model, T.T5ForConditionalGeneration):
            return model(input_ids=IDS, decoder_input_ids=IDS[:, :5]).logits
        return model(IDS).logits


def distinct(model: nn.Module) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    return names


def module_of(model: nn.Module, address: str) -> nn.Module:
    return model.get_submodule(address.rpartition(".")[0])


def assert_tied(model: nn.Module, name: str, aliases: tuple[str, ...]) -> None:
    """Every alias holds the very objects ``name`` holds: pruned or not."""
    module, tensor = module_of(model, name), name.rpartition(".")[2]
    for alias in aliases:
        other = module_of(model, alias)
        if hasattr(module, tensor + "_mask"):
            assert other._parameters[tensor + "_orig"] is module._parameters[tensor + "_orig"]
            assert other._buffers[tensor + "_mask"] is module._buffers[tensor + "_mask"]
            assert tensor not in other._parameters
        else:
            assert other._parameters[tensor] is module._parameters[tensor]
            assert tensor + "_orig" not in other._parameters
            assert tensor + "_mask" not in other._buffers


def masked_oracle(model: nn.Module, name: str, mask: torch.Tensor) -> nn.Module:
    """A copy of the unpruned ``model`` with the shared parameter multiplied by ``mask``
    (deepcopy keeps the tie)."""
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.get_parameter(name).mul_(mask)
    return twin


# -- listed and counted once ---------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_tied_parameter_is_listed_once_with_its_aliases(kind):
    model = BUILDERS[kind]()
    s = Session(model)
    groups = distinct(model)
    assert len(s.names) == len(groups)
    assert s.tied == TIED[kind]
    assert sorted(s.names) == sorted(names[0] for names in groups.values())
    report = s.report(totals=True)
    assert int(report["numel"].iloc[-1]) == sum(p.numel() for p in model.parameters())
    rows = report.set_index("name")["aliases"]
    for name, aliases in TIED[kind].items():
        assert rows[name] == aliases
        assert all(alias not in rows.index for alias in aliases)
        assert s.info(aliases[0]).name == name  # an alias means the listed tensor


def test_a_global_step_over_both_names_counts_the_matrix_once():
    model = gpt2()
    oracle = copy.deepcopy(model)
    s = Session(model)
    targets = ["transformer.h.0.mlp.c_fc.weight", "transformer.wte.weight", "lm_head.weight"]
    step = s.apply_global(targets, "l1_unstructured", amount=1000)
    assert step.targets == ("transformer.h.0.mlp.c_fc.weight", "transformer.wte.weight")
    assert sum(int((~s.mask(n)).sum()) for n in s.names) == 1000  # not 2 x the tied share
    torch_prune.global_unstructured(
        [(oracle.transformer.h[0].mlp.c_fc, "weight"), (oracle.transformer.wte, "weight")],
        pruning_method=torch_prune.L1Unstructured, amount=1000)
    assert torch.equal(model.transformer.wte.weight_mask, oracle.transformer.wte.weight_mask)
    assert torch.equal(s.mask("lm_head.weight"), s.mask("transformer.wte.weight"))


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_default_targets_leave_out_embeddings_norms_and_aliases(kind):
    model = BUILDERS[kind]()
    s = Session(model)
    targets = s.default_targets()
    tied = {a for aliases in TIED[kind].values() for a in aliases} | set(TIED[kind])
    for name in targets:
        module = module_of(model, name)
        assert not isinstance(module, (nn.Embedding, nn.LayerNorm)), name
        assert "Norm" not in type(module).__name__
        assert "Embedding" not in type(module).__name__
        assert name not in tied
    expected = [n for n in s.names if n.endswith(".weight") and len(s.info(n).shape) >= 2
                and type(module_of(model, n)).__name__ in ("Linear", "Conv1D")
                and n not in tied]
    assert targets
    assert targets == expected
    pos = {"gpt2": "transformer.wpe.weight", "bert": "bert.embeddings.position_embeddings.weight"}
    if kind in pos:  # still prunable when picked by name
        s.apply(pos[kind], "l1_unstructured", amount=0.5)
        assert s.report().set_index("name")["sparsity"][pos[kind]] >= 0.5


# -- pruned once, every alias sees it, commit changes nothing ----------------------------------
CASES = [("gpt2", n) for n in ("transformer.wte.weight", "lm_head.weight")] + [
    ("t5", n) for n in ("shared.weight", "encoder.embed_tokens.weight", "lm_head.weight")]


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_pruning_through_any_name_prunes_the_one_tensor_and_commit_keeps_outputs(kind, name):
    model = BUILDERS[kind]()
    before = logits(model)
    listed, aliases = next(iter(TIED[kind].items()))
    weight = model.get_parameter(listed)
    s = Session(model)
    step = s.apply(name, "l1_unstructured", amount=0.5)
    assert step.target == listed
    assert_tied(model, listed, aliases)
    mask = module_of(model, listed).weight_mask
    expected_mask = torch_prune.L1Unstructured(0.5).compute_mask(weight.detach(),
                                                                  torch.ones_like(weight))
    assert torch.equal(mask, expected_mask)
    for alias in aliases:
        assert torch.equal(s.mask(alias), mask.bool())
    pruned = logits(model)
    assert not torch.equal(pruned, before)
    assert torch.equal(pruned, logits(masked_oracle(BUILDERS[kind](), listed, mask)))
    state = model.state_dict()
    for alias in aliases:
        for suffix in ("_orig", "_mask"):
            assert state[alias + suffix].data_ptr() == state[listed + suffix].data_ptr()
    s.commit()
    assert torch.equal(logits(model), pruned)  # commit never changes what the model computes
    assert_tied(model, listed, aliases)
    assert model.get_parameter(listed) is weight
    assert all(model.get_parameter(a) is weight for a in aliases)


@pytest.mark.parametrize("kind", ["gpt2", "t5", "bert"])
def test_undo_and_reset_give_back_the_tie_exactly(kind):
    model = BUILDERS[kind]()
    ties = TIED[kind]
    every = [a for aliases in ties.values() for a in aliases]
    keys = list(model.state_dict())
    orders = {a: list(module_of(model, a)._parameters) for a in every}
    before = logits(model)
    s = Session(model)
    for listed, aliases in ties.items():
        s.apply(aliases[-1], "random_unstructured", amount=0.3)
        s.apply(listed, "l1_unstructured", amount=0.2)
        assert_tied(model, listed, aliases)
    s.undo()
    for listed, aliases in ties.items():
        assert_tied(model, listed, aliases)
        assert torch.equal(s.mask(aliases[0]), s.mask(listed))
    s.reset()
    for listed, aliases in ties.items():
        assert_tied(model, listed, aliases)
        assert all(model.get_parameter(a) is model.get_parameter(listed) for a in aliases)
    assert list(model.state_dict()) == keys
    assert {a: list(module_of(model, a)._parameters) for a in every} == orders
    assert all(not module_of(model, a)._forward_pre_hooks for a in every)
    assert torch.equal(logits(model), before)


def test_commit_through_an_alias_and_its_review_name_every_key():
    model = gpt2()
    s = Session(model)
    s.apply("transformer.wte.weight", "l1_unstructured", amount=0.5)
    review = s.review_commit("lm_head.weight")
    assert review.names == ("transformer.wte.weight",)
    before, pruned = set(model.state_dict()), logits(model)
    result = s.commit("lm_head.weight")
    after = set(model.state_dict())
    assert result.names == ("transformer.wte.weight",)
    assert set(review.keys_removed) == before - after == {
        "transformer.wte.weight_orig", "transformer.wte.weight_mask",
        "lm_head.weight_orig", "lm_head.weight_mask"}
    assert set(review.keys_added) == after - before == {"transformer.wte.weight",
                                                         "lm_head.weight"}
    assert torch.equal(logits(model), pruned)


def test_previews_and_comparisons_through_an_alias_are_the_tensors():
    model = gpt2()
    s = Session(model)
    mask = s.preview("lm_head.weight", "l1_unstructured", amount=0.3)
    assert torch.equal(mask, s.preview("transformer.wte.weight", "l1_unstructured", amount=0.3))
    frame = s.compare_global_local(["lm_head.weight", "transformer.h.0.attn.c_attn.weight"])
    assert frame["name"].tolist() == ["transformer.wte.weight",
                                      "transformer.h.0.attn.c_attn.weight", "TOTAL"]
    assert int(frame["numel"].iloc[-1]) == (model.transformer.wte.weight.numel()
                                            + model.transformer.h[0].attn.c_attn.weight.numel())
    s.apply("lm_head.weight", "l1_unstructured", amount=0.3)
    assert torch.equal(model.transformer.wte.weight_mask, mask)


def test_a_failed_transaction_gives_back_the_tie():
    model = gpt2()
    s = Session(model)

    def prune_then_fail() -> None:
        with s.transaction():
            s.apply("lm_head.weight", "l1_unstructured", amount=0.5)
            assert model.lm_head.weight_mask is model.transformer.wte.weight_mask
            raise KeyboardInterrupt  # as a user's interrupt would

    with pytest.raises(KeyboardInterrupt):
        prune_then_fail()
    assert s.steps == ()
    assert model.lm_head.weight is model.transformer.wte.weight
    assert "weight_mask" not in model.lm_head._buffers


def test_a_plan_naming_an_alias_applies_to_the_listed_tensor():
    model = gpt2()
    plan = Plan.from_json(Plan([Step("l1_unstructured", "lm_head.weight", amount=0.25)]).to_json())
    s = Session(model)
    s.apply_all(plan)  # what the explorer's plan import runs
    assert s.steps == (Step("l1_unstructured", "transformer.wte.weight", amount=0.25),)
    assert_tied(model, "transformer.wte.weight", ("lm_head.weight",))


# -- snippet on stock torch --------------------------------------------------------------------
def test_the_snippet_keeps_the_tie_on_stock_torch():
    model, fresh = gpt2(), gpt2()
    s = Session(model)
    s.apply("lm_head.weight", "random_unstructured", amount=0.3)
    s.apply_global(["transformer.h.1.mlp.c_proj.weight", "transformer.wte.weight"],
                   "l1_unstructured", amount=0.2)
    snippet = s.plan.to_snippet()
    assert "share_pruning(model, \"transformer.wte.weight\", [\"lm_head.weight\"])" in snippet
    assert "unties" in snippet  # the comment says why
    exec(snippet, {"model": fresh})  # stock torch.nn.utils.prune only
    assert list(fresh.lm_head._forward_pre_hooks.values()) == list(
        fresh.transformer.wte._forward_pre_hooks.values())  # the same hook object
    assert_tied(fresh, "transformer.wte.weight", ("lm_head.weight",))
    for name in ("transformer.wte", "transformer.h.1.mlp.c_proj"):
        assert torch.equal(fresh.get_submodule(name).weight_mask,
                           model.get_submodule(name).weight_mask)
    assert torch.equal(logits(fresh), logits(model))
    s.commit()
    committed = gpt2()
    exec(s.plan.to_snippet(), {"model": committed})  # the plan ends with remove steps
    assert committed.lm_head.weight is committed.transformer.wte.weight
    assert torch.equal(logits(committed), logits(model))


def test_a_plan_without_the_session_writes_no_tie_helper():
    snippet = Plan([Step("l1_unstructured", "transformer.wte.weight", amount=0.5)]).to_snippet()
    assert "share_pruning" not in snippet


def test_the_core_acts_like_torch_on_one_module_of_a_tie():
    # The module-level API sees one module; like torch it unties (the session handles ties).
    ours, theirs = gpt2(), gpt2()
    pe_prune.l1_unstructured(ours.lm_head, "weight", amount=0.5)
    torch_prune.l1_unstructured(theirs.lm_head, "weight", amount=0.5)
    assert torch.equal(ours.lm_head.weight_mask, theirs.lm_head.weight_mask)
    assert ours.transformer.wte.weight is ours.lm_head.weight_orig
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())


# -- checkpoints round-trip --------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["gpt2", "t5", "bert"])
def test_a_pruned_tied_checkpoint_loads_back_tied(kind):
    model = BUILDERS[kind]()
    s = Session(model)
    for aliases in TIED[kind].values():
        s.apply(aliases[-1], "l1_unstructured", amount=0.4)
    fresh = BUILDERS[kind]()
    torch.manual_seed(1)
    load_pruned_state_dict(fresh, model.state_dict())
    for name, aliases in TIED[kind].items():
        assert_tied(fresh, name, aliases)
        tensor = name.rpartition(".")[2]
        assert torch.equal(getattr(module_of(fresh, name), tensor + "_mask"),
                           getattr(module_of(model, name), tensor + "_mask"))
    assert torch.equal(logits(fresh), logits(model))
    again = Session(fresh)
    assert again.tied == TIED[kind]
    assert again.report()["zeros"].sum() == s.report()["zeros"].sum()


def test_a_checkpoint_whose_aliases_disagree_is_refused():
    model = gpt2()
    Session(model).apply("transformer.wte.weight", "l1_unstructured", amount=0.4)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["lm_head.weight_mask"] = torch.ones_like(state["lm_head.weight_mask"])
    with pytest.raises(StateDictMismatchError, match=re.escape(
            "lm_head.weight_mask differs from transformer.wte.weight_mask, but lm_head.weight "
            "and transformer.wte.weight are one tied parameter")):
        load_pruned_state_dict(gpt2(), state)


def test_a_stock_torch_checkpoint_of_an_untied_model_still_loads():
    model = gpt2()
    torch_prune.l1_unstructured(model.transformer.wte, "weight", amount=0.4)  # torch unties
    fresh = gpt2()
    load_pruned_state_dict(fresh, model.state_dict())
    assert torch.equal(fresh.transformer.wte.weight_mask, model.transformer.wte.weight_mask)
    assert torch.equal(logits(fresh), logits(model))


@pytest.fixture
def gpt2_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    name = f"pe_tied_{uuid.uuid4().hex[:10]}"
    source = inspect.getsource(gpt2).replace("def gpt2", "def build")
    (tmp_path / f"{name}.py").write_text(f"from torch import nn\n\nVOCAB = {VOCAB}\n\n\n{source}",
                                         encoding="utf-8")
    yield f"{name}:build"
    sys.modules.pop(name, None)


def test_cli_apply_then_report_round_trips_and_counts_once(capsys, tmp_path, gpt2_factory):
    torch.save(gpt2().state_dict(), tmp_path / "gpt2.pt")
    Plan([Step("l1_unstructured", "lm_head.weight", amount=0.5)]).save(tmp_path / "plan.json")
    code = cli.main(["apply", "gpt2.pt", "plan.json", "-o", "out.pt", "--model", gpt2_factory])
    out = capsys.readouterr().out
    assert code == 0
    model = gpt2()
    total = sum(p.numel() for p in model.parameters())  # distinct entries
    assert int((model.transformer.wte.weight == 0).sum()) == 0
    zeros = model.transformer.wte.weight.numel() // 2 + sum(  # zero biases count too
        int((p == 0).sum()) for p in model.parameters())
    assert f"({zeros:,} of {total:,} entries are 0)" in out
    code = cli.main(["report", "out.pt", "--model", gpt2_factory])
    out = capsys.readouterr().out
    assert code == 0
    rows = [line for line in out.splitlines() if "wte.weight" in line or "lm_head" in line]
    assert len(rows) == 1  # one row: the tensor, naming its alias
    assert "lm_head.weight" in rows[0]
    assert "50.0%" in rows[0]
    saved = torch.load(tmp_path / "out.pt", weights_only=True)
    fresh = gpt2()
    load_pruned_state_dict(fresh, saved)
    assert fresh.lm_head.weight_mask is fresh.transformer.wte.weight_mask


def test_the_explorer_lists_a_tied_tensor_once_naming_its_aliases():
    from prune_explorer.widgets import Explorer

    model = gpt2()
    ex = Explorer(model)
    labels = dict((v, k) for k, v in ex.ui.tensor.options)
    assert len(labels) == len(distinct(model))
    assert "lm_head.weight" not in labels
    assert labels["transformer.wte.weight"].startswith(
        "transformer.wte.weight (tied: also lm_head.weight) · ")
    assert ex.tensor == ex.session.default_targets()[0]  # not the token embedding
    ex.ui.import_text.value = Plan([Step("l1_unstructured", "lm_head.weight", amount=0.5)]
                                   ).to_json()
    ex.ui.import_plan.click()  # the explorer's import: the alias means the tied tensor
    assert ex.session.steps == (Step("l1_unstructured", "transformer.wte.weight", amount=0.5),)
    assert_tied(model, "transformer.wte.weight", ("lm_head.weight",))
    ex.ui.tabs.selected_index = 4  # Export: the snippet keeps the tie
    assert 'share_pruning(model, "transformer.wte.weight", ["lm_head.weight"])' in \
        ex.ui.snippet.value
    ex.close()


def test_a_tie_stock_torch_broke_is_named_and_mended_by_the_next_step():
    model = gpt2()
    torch_prune.l1_unstructured(model.lm_head, "weight", amount=0.25)  # under the alias only
    with pytest.warns(UserWarning, match=re.escape(
            "tensor 'lm_head.weight' is tied to 'transformer.wte.weight' (one parameter) but "
            "they do not share its pruning")):
        s = Session(model)
    assert s.tied == {"lm_head.weight": ("transformer.wte.weight",)}  # listed where pruned
    assert s.found == {"lm_head.weight": ("l1_unstructured",)}
    s.apply("transformer.wte.weight", "l1_unstructured", amount=0.25)  # on top of torch's
    assert_tied(model, "lm_head.weight", ("transformer.wte.weight",))
    mask = model.lm_head.weight_mask
    assert int((mask == 0).sum()) == mask.numel() // 4 + (mask.numel() - mask.numel() // 4) // 4
    expected = masked_oracle(gpt2(), "lm_head.weight", mask)
    assert torch.equal(logits(model), logits(expected))

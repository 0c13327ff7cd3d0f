"""The loop on a real model: a small Hugging Face GPT-2 built from a config (no download),
trained by a user function doing a few steps of language-model loss on random tokens (no
claims about quality); on CUDA, the same masks as on the CPU for the same weights."""

from __future__ import annotations

import copy

import pytest
import torch
import transformers as T
from torch import nn

from prune_explorer import Session
from prune_explorer.session import Schedule


def gpt2() -> T.GPT2LMHeadModel:
    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32,
                       bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                       attn_pdrop=0.0)
    return T.GPT2LMHeadModel(cfg).eval()


def lm_train(model: nn.Module, epochs: int) -> None:
    """A user's training function: a few AdamW steps of LM loss on random tokens."""
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, 100, (4, 16), generator=g).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    model.train()
    for _ in range(2 * epochs):
        optimizer.zero_grad()
        model(input_ids=tokens, labels=tokens).loss.backward()
        optimizer.step()
    model.eval()


def lm_loss(model: nn.Module) -> float:
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(8)
    tokens = torch.randint(0, 100, (4, 16), generator=g).to(device)
    with torch.no_grad():
        return float(model(input_ids=tokens, labels=tokens).loss)


@pytest.mark.slow
def test_a_schedule_runs_on_gpt2_with_a_user_training_function():
    model = gpt2()
    twin = copy.deepcopy(model)
    s = Session(model)
    run = s.fine_tune_schedule(Schedule.iterative(0.75, rounds=2, epochs_per_round=1),
                               lm_train, lm_loss)
    assert [r.target for r in run.rounds] == list(Schedule.iterative(0.75, 2, 1).targets)
    for result in run.rounds:
        assert abs(result.realized - result.target) < 1e-3
        assert result.accuracy_after != result.accuracy_before  # it trained
    targets = s.default_targets()
    assert "lm_head.weight" not in targets
    assert "transformer.wte.weight" not in targets  # the tied embedding stays whole
    for name in targets:
        assert s.history(name).steps[-1].method == "fine_tune"
    # the snippet, on stock torch with the same function: the same weights and masks
    exec(compile(s.plan.to_snippet(), "snippet", "exec"), {"model": twin, "train": lm_train})
    ours, theirs = model.state_dict(), twin.state_dict()
    assert list(ours) == list(theirs)
    for key in ours:
        assert torch.equal(ours[key], theirs[key]), key


def _shift(model: nn.Module, epochs: int) -> None:
    """A "training" with the same bits on every device: adds CPU-drawn noise to each weight."""
    g = torch.Generator().manual_seed(epochs)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g).to(p.device) * 0.01)


@pytest.mark.cuda
def test_on_cuda_the_rounds_give_the_cpu_masks():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    cpu, gpu = gpt2(), gpt2().to("cuda")
    runs = []
    for model in (cpu, gpu):
        s = Session(model)
        runs.append(s.fine_tune_schedule(Schedule.gradual(0.9, epochs=3), _shift,
                                         scope="global"))
    for key, value in cpu.state_dict().items():
        other = gpu.state_dict()[key].cpu()
        if key.endswith("_mask"):
            assert torch.equal(value, other), key  # the same masks
        else:
            assert torch.equal(value, other), key  # the same weights (additions only)
    assert [r.realized for r in runs[0].rounds] == [r.realized for r in runs[1].rounds]
    # real training on the GPU runs too (its weights differ from the CPU's: no comparison)
    s = Session(gpu)
    run = s.fine_tune_schedule(Schedule.one_shot(0.95, epochs=1), lm_train, lm_loss)
    assert run.rounds[-1].realized == pytest.approx(0.95, abs=1e-3)

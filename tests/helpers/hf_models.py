"""Tiny Hugging Face models built from configs (random weights, no download) and their inputs,
for the real-model tests: GPT-2, Llama, OPT, BERT, T5 and ViT.

Every factory seeds torch's generator on a forked RNG, so two calls give the same weights and the
caller's random state is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import transformers as T
from torch import nn

VOCAB = 64


def _seeded(build: Callable[[], nn.Module]) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return build().eval()


def gpt2() -> nn.Module:
    """GPT-2 (``Conv1D`` layers; ``lm_head.weight`` *is* ``transformer.wte.weight``)."""
    return _seeded(lambda: T.GPT2LMHeadModel(T.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=32,
        bos_token_id=0, eos_token_id=0)))


def llama() -> nn.Module:
    """Llama (untied head, gated MLP)."""
    return _seeded(lambda: T.LlamaForCausalLM(T.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, bos_token_id=0, eos_token_id=0)))


def opt() -> nn.Module:
    """OPT (``lm_head.weight`` tied to the token embedding)."""
    return _seeded(lambda: T.OPTForCausalLM(T.OPTConfig(
        num_hidden_layers=1, hidden_size=32, ffn_dim=64, num_attention_heads=2,
        vocab_size=VOCAB, max_position_embeddings=32, word_embed_proj_dim=32,
        bos_token_id=0, eos_token_id=0, pad_token_id=1)))


def bert() -> nn.Module:
    """BERT for masked LM (the decoder's weight and bias are tied)."""
    return _seeded(lambda: T.BertForMaskedLM(T.BertConfig(
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
        vocab_size=VOCAB, max_position_embeddings=32)))


def t5() -> nn.Module:
    """T5 (one matrix as ``shared``, both ``embed_tokens`` and ``lm_head``)."""
    return _seeded(lambda: T.T5ForConditionalGeneration(T.T5Config(
        num_layers=1, num_decoder_layers=1, d_model=32, d_ff=64, num_heads=2, d_kv=16,
        vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0,
        tie_word_embeddings=True)))


def vit() -> nn.Module:
    """ViT for image classification (saved by ``save_pretrained`` under its legacy key names)."""
    return _seeded(lambda: T.ViTForImageClassification(T.ViTConfig(
        num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
        image_size=8, patch_size=4, num_labels=3)))


def int8_llama() -> nn.Module:
    """:func:`llama` whose first ``up_proj`` holds int8 values (as a weight-only int8
    checkpoint does): a weight the pruning API refuses."""
    model = llama()
    layer = model.get_submodule("model.layers.0.mlp.up_proj")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        values = torch.randint(-8, 8, tuple(layer.weight.shape), dtype=torch.int8)
    layer.weight = nn.Parameter(values, requires_grad=False)
    return model


FACTORIES: dict[str, Callable[[], nn.Module]] = {
    "gpt2": gpt2, "llama": llama, "opt": opt, "bert": bert, "t5": t5, "vit": vit}


def inputs(name: str) -> dict[str, torch.Tensor]:
    """Keyword inputs for the model ``name`` (a fixed batch)."""
    generator = torch.Generator().manual_seed(1)
    if name == "vit":
        return {"pixel_values": torch.randn(2, 3, 8, 8, generator=generator)}
    ids = torch.randint(2, VOCAB, (2, 8), generator=generator)
    if name == "t5":
        return {"input_ids": ids, "decoder_input_ids": ids[:, :4]}
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def outputs(model: nn.Module, name: str) -> torch.Tensor:
    """The model's logits on :func:`inputs` (no grad)."""
    with torch.no_grad():
        out: Any = model(**inputs(name))
    return out.logits

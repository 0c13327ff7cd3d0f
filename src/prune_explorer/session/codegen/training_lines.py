"""Snippet lines for the steps that train and rewind (:mod:`..steps.training`).

A schedule's plan replays on stock torch given the same training function: the snippet calls
``train(model, epochs)`` where the session did, keeps and writes back the weights with plain
tensor copies, and after each of those brings the pruned copies (``name = name_orig *
name_mask``, a plain attribute that torch's forward pre-hook recomputes on each forward pass)
up to date, as the session does, so the next pruning step ranks the weights as they are, not as
the last forward pass saw them. Two small functions do that; the snippet defines them once.

Examples
--------
>>> from prune_explorer.session.steps.training import TrainingStep
>>> print("\\n".join(step_lines(TrainingStep.fine_tune(3))))
train(model, 3)
refresh_pruned(model)
"""

from __future__ import annotations

from ..steps.training import TrainingStep

__all__ = ["HEADER", "HELPER", "step_lines", "title"]

#: What the snippet says first when it trains: where ``train`` comes from.
HEADER = [
    "# It trains too: define train(model, epochs) first -- the training function the session",
    "# was given (it trains `model` in place; build the optimizer inside it) -- so the weights",
    "# and the masks come out as in the session.",
]

#: The functions the snippet defines once when a step trains or rewinds (stock torch only).
HELPER: list[str] = '''

def refresh_pruned(model):
    # The pruned copy <name> = <name>_orig * <name>_mask is a plain attribute that the forward
    # pre-hook recomputes on each forward pass; after the weights change outside one, bring
    # it up to date so that the next pruning call ranks the weights as they are now.
    for module in model.modules():
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, prune.BasePruningMethod):
                setattr(module, hook._tensor_name, hook.apply_mask(module))


def model_weights(model):
    # Every parameter (<name>_orig of a pruned one) and every buffer except the pruning
    # masks, each tensor once.
    seen = set()
    for module in model.modules():
        for name, tensor in [*module._parameters.items(), *module._buffers.items()]:
            if tensor is None or id(tensor) in seen:
                continue
            if name in module._buffers and name.endswith("_mask") \\
                    and name[:-5] + "_orig" in module._parameters:
                continue
            seen.add(id(tensor))
            yield tensor'''.splitlines()


def title(index: int, step: TrainingStep) -> str:
    """The comment above the step's lines."""
    if step.method == "fine_tune":
        epochs = step.epochs
        return f"# step {index}: fine_tune for {epochs} epoch{'s' * (epochs != 1)}"
    if step.method == "keep_weights":
        return f"# step {index}: keep_weights (the weights a later rewind writes back)"
    return f"# step {index}: rewind (every weight back to the kept ones; the masks stay)"


def step_lines(step: TrainingStep) -> list[str]:
    """The lines that replay ``step``."""
    if step.method == "fine_tune":
        return [f"train(model, {step.epochs})", "refresh_pruned(model)"]
    if step.method == "keep_weights":
        return ["kept = [(t, t.detach().clone()) for t in model_weights(model)]"]
    return ["with torch.no_grad():",
            "    for tensor, value in kept:",
            "        tensor.copy_(value)",
            "refresh_pruned(model)"]

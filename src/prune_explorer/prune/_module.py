"""Every change pruning makes to a module, in one place.

A pruned tensor ``name`` of a module is stored as

* parameter ``name_orig`` -- the original ``Parameter`` object, untouched values;
* buffer ``name_mask`` -- the mask (same dtype as torch would give it);
* plain attribute ``name`` -- ``name_mask * name_orig``, recomputed before every forward
  by the pruning method registered as a forward pre-hook.

Masks are always computed *before* the module is touched, and installing them is wrapped in a
snapshot/restore, so a failure leaves the module exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

from . import _fsdp
from ._hooks import pruning_hooks
from ._interrupts import held_interrupts, machinery
from .validation import UnprunableTensorError, problem, quantized_layer, unprunable

if TYPE_CHECKING:
    from ._base import BasePruningMethod


class PruningStateError(ValueError, AssertionError):
    """The module is not in the pruning state the call needs (e.g. ``remove`` on an unpruned
    tensor). A ``ValueError`` like torch's ``remove``; also an ``AssertionError`` like the
    checks torch makes inside its method objects."""


def find_hook(module: nn.Module, name: str, where: str) -> tuple[int, Any] | None:
    """The (key, method) of the pruning hook acting on ``name``, or None."""
    if not module._forward_pre_hooks:  # no hook at all: the common first prune
        return None
    found = _pruning_hooks(module, name)
    if len(found) > 1:
        raise PruningStateError(
            f"{where}: tensor {name!r} of {type(module).__name__} has {len(found)} pruning hooks; "
            "there must be at most one (several steps are chained in one PruningContainer)"
        )
    return found[0] if found else None


def current_tensor(module: Any, name: Any, where: str) -> torch.Tensor:
    """The tensor that pruning ``name`` would act on, with clear errors for bad names."""
    if not isinstance(module, nn.Module):
        raise TypeError(problem(where, "module", "a torch.nn.Module", type(module).__name__))
    if not isinstance(name, str):
        raise TypeError(problem(where, "name", "a str naming a parameter", name))
    if module._forward_pre_hooks and name.endswith(("_orig", "_mask")):
        base, role = name[:-5], ("original values" if name.endswith("_orig") else "mask")
        if _pruning_hooks(module, base):
            # Pruning these would leave `base` unreachable (weight_orig -> weight_orig_orig).
            raise PruningStateError(problem(
                where, "name", f"a tensor to prune, not the {role} of the pruned tensor "
                f"{base!r}; prune {base!r} itself to prune it further", name))
    parameters = module._parameters
    value: Any = parameters.get(name)  # a plain parameter: read without Module.__getattr__
    if value is None:
        pruned = name + "_orig" in parameters and name + "_mask" in module._buffers
        if not pruned:
            if name in module._buffers:
                raise TypeError(
                    problem(where, "name",
                            f"a parameter of {type(module).__name__}, not a buffer", name)
                )
            if name not in parameters:
                if quantized_layer(module):
                    raise UnprunableTensorError(
                        f"{where}: cannot prune {name!r} of {type(module).__name__}: it is a "
                        "quantized layer (torch.ao quantization) whose weight is packed "
                        "integers, not a parameter; prune the float model, then quantize")
                choices = sorted(n for n, p in parameters.items() if p is not None)
                raise AttributeError(
                    problem(where, "name", f"a parameter of {type(module).__name__} "
                            f"(it has {choices})", name)
                )
        # a sharded pruned tensor is not computed here (as large as its shard): see _fsdp
        value = _fsdp.pruned_stand_in(module, name) if pruned else None
        if value is None:
            value = getattr(module, name, None)
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            problem(where, "name", "a parameter holding a tensor", f"{name} = {value!r}")
        )
    why = unprunable(value)
    if why is not None:
        raise UnprunableTensorError(f"{where}: cannot prune {name!r} of "
                                    f"{type(module).__name__}: {why}")
    return value


class ModuleSnapshot:
    """Everything pruning may change on ``module`` for the tensors ``names``; the one snapshot.

    It holds references, not copies: the ``Parameter`` objects of ``name`` and ``name_orig``
    (so ``restore`` gives back the very same objects), the ``name_mask`` buffer, the pruning
    hook acting on ``name`` with the methods its container held, the plain ``name`` attribute
    and the key order of the module's parameters, buffers and forward pre-hooks. Restoring
    touches only those entries and leaves everything else on the module alone.

    Parameters
    ----------
    module : torch.nn.Module
    names : iterable of str
        Tensor names (``"weight"``), pruned or not.
    keep_values : bool, default False
        Also copy the values of ``name_orig`` of pruned tensors (``remove`` multiplies them by
        the mask in place, so only a copy can undo it), or of the plain parameter ``name`` (a
        step that edits weights before pruning them).
    store : callable, optional
        ``store(mask) -> load`` keeps a mask buffer and returns a function that gives it back
        (e.g. as packed bits, to keep long undo histories small). Default: by reference.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> layer = torch.nn.Linear(3, 2)
    >>> weight, snap = layer.weight, ModuleSnapshot(layer, ["weight"])
    >>> _ = prune.l1_unstructured(layer, "weight", amount=0.5)
    >>> snap.restore()
    >>> layer.weight is weight, list(layer.state_dict())
    (True, ['weight', 'bias'])
    """

    def __init__(
        self,
        module: nn.Module,
        names: Iterable[str],
        *,
        keep_values: bool = False,
        store: Callable[[torch.Tensor], Callable[[], torch.Tensor]] | None = None,
    ) -> None:
        self.module = module
        self.names = tuple(dict.fromkeys(names))
        self.order = (tuple(module._parameters), tuple(module._buffers),
                      tuple(module._forward_pre_hooks))
        self.parameters: dict[str, Any] = {}
        self.masks: dict[str, Callable[[], torch.Tensor]] = {}
        self.hooks: dict[int, Any] = {}
        self.containers: list[tuple[Any, tuple[Any, ...]]] = []
        self.attributes: dict[str, Any] = {}
        self.values: dict[str, torch.Tensor] = {}
        keep = store or _by_reference
        for name in self.names:
            for key in (name, name + "_orig"):
                if key in module._parameters:
                    self.parameters[key] = module._parameters[key]
            mask = module._buffers.get(name + "_mask")
            if mask is not None:
                self.masks[name] = keep(mask)
            for hook_id, hook in _pruning_hooks(module, name):
                self.hooks[hook_id] = hook
                if hasattr(hook, "_pruning_methods"):
                    self.containers.append((hook, hook._pruning_methods))
            if name in module.__dict__:
                # With a custom store the pruned copy (orig * mask) is recomputed on restore
                # instead of being kept alive.
                recompute = store is not None and mask is not None and name in self._hooked()
                self.attributes[name] = _RECOMPUTE if recompute else module.__dict__[name]
            held = module._parameters.get(name + "_orig", module._parameters.get(name))
            if keep_values and held is not None:  # the pruned tensor's original, or the plain one
                key = name + "_orig" if name + "_orig" in module._parameters else name
                self.values[key] = held.detach().clone()

    def _hooked(self) -> set[str | None]:
        return {getattr(h, "_tensor_name", None) for h in self.hooks.values()}

    @property
    def size(self) -> int:
        """Bytes of tensor data this snapshot holds on its own (value copies)."""
        return sum(v.numel() * v.element_size() for v in self.values.values())

    def restore(self) -> None:
        """Put the entries back as captured (idempotent)."""
        m = self.module
        for name in self.names:
            for hook_id, _ in _pruning_hooks(m, name):
                del m._forward_pre_hooks[hook_id]
            for key in (name, name + "_orig"):
                m._parameters.pop(key, None)
            m._buffers.pop(name + "_mask", None)
            m.__dict__.pop(name, None)
        for hook, methods in self.containers:
            hook._pruning_methods = methods
        for key, param in self.parameters.items():
            m._parameters[key] = param
        for key, value in self.values.items():
            with torch.no_grad():
                self.parameters[key].copy_(value)
        for name, load in self.masks.items():
            mask, orig = load(), self.parameters.get(name + "_orig")
            if orig is not None and mask.device != orig.device:  # moved since (Session.to)
                mask = mask.to(orig.device)
            m._buffers[name + "_mask"] = mask
        m._forward_pre_hooks.update(self.hooks)
        for name, value in self.attributes.items():
            if value is _RECOMPUTE:
                value = next(h for h in self.hooks.values()
                             if getattr(h, "_tensor_name", None) == name).apply_mask(m)
            m.__dict__[name] = value
        mappings: tuple[dict[Any, Any], ...] = (m._parameters, m._buffers, m._forward_pre_hooks)
        for mapping, order in zip(mappings, self.order, strict=True):
            _reorder(mapping, order)
        for name in self.names:
            _fsdp.restored(m, name)  # DTensors / FSDP2: its parameter name follows
        refresh = getattr(m, "_init_flat_weights", None)  # RNNs cache their weights in a list
        if refresh is not None:
            refresh()

    def __repr__(self) -> str:
        return (f"ModuleSnapshot({type(self.module).__name__}, names={list(self.names)}, "
                f"{len(self.hooks)} hook(s), {len(self.values)} value cop(ies))")


_RECOMPUTE = object()


def _by_reference(mask: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: mask


def _pruning_hooks(module: nn.Module, name: str) -> list[tuple[int, Any]]:
    if not module._forward_pre_hooks:
        return []
    return [(key, hook) for key, hook, tensor in pruning_hooks(module) if tensor == name]


def _reorder(mapping: dict[Any, Any], order: tuple[Any, ...]) -> None:
    items = dict(mapping)
    mapping.clear()
    for key in order:
        if key in items:
            mapping[key] = items.pop(key)
    mapping.update(items)


def snapshot(
    pairs: Iterable[tuple[nn.Module, str]], *, keep_values: bool = False,
    store: Callable[[torch.Tensor], Callable[[], torch.Tensor]] | None = None,
) -> list[ModuleSnapshot]:
    """One :class:`ModuleSnapshot` per module of the ``(module, name)`` pairs (restore them in
    reverse order)."""
    if isinstance(pairs, list) and len(pairs) == 1:  # one tensor: nothing to group
        module, name = pairs[0]
        return [ModuleSnapshot(module, (name,), keep_values=keep_values, store=store)]
    grouped: dict[int, tuple[nn.Module, list[str]]] = {}
    for module, name in pairs:
        grouped.setdefault(id(module), (module, []))[1].append(name)
    return [ModuleSnapshot(m, names, keep_values=keep_values, store=store)
            for m, names in grouped.values()]


class transaction:  # used as a function: ``with transaction(pairs):``
    """Restore every (module, name) in ``pairs`` if the block raises (``BaseException``
    included). Ctrl-C is held while the snapshot is taken and restored (see ``_interrupts``):
    only the block is open to it, so a second Ctrl-C never stops the rollback half-way.

    A class rather than a generator: entered on every pruning call, where a generator-based
    ``with`` costs more than the snapshot of a fresh tensor.
    """

    __slots__ = ("gate", "held", "pairs", "snaps")

    def __init__(self, pairs: Iterable[tuple[nn.Module, str]]) -> None:
        self.pairs = pairs

    @machinery
    def __enter__(self) -> None:
        self.held = held_interrupts()
        gate = self.gate = self.held.__enter__()
        try:
            self.snaps = snapshot(self.pairs)
            gate.check()  # a Ctrl-C held while the snapshot was taken: nothing changed yet
        except BaseException:
            self.held.__exit__(None, None, None)
            raise
        gate.is_open = True

    @machinery
    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.gate.is_open = False
        try:
            if kind is not None:
                for snap in reversed(self.snaps):
                    snap.restore()
        finally:
            self.held.__exit__(kind, error, trace)


def install(
    module: nn.Module,
    name: str,
    method: BasePruningMethod,
    mask: torch.Tensor,
    old: tuple[int, Any] | None,
    container: type[Any],
) -> BasePruningMethod:
    """Record ``method`` and its finished ``mask`` on ``module``; returns the hook now in charge.

    ``old`` is the existing hook (from :func:`find_hook`); the new method then joins a
    ``container`` (the core's ``PruningContainer``) with it, as torch does.
    """

    if old is None and _install_fresh(module, name, method, mask, container):
        return method
    with transaction([(module, name)]):
        if old is None:
            orig = module._parameters[name]
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            hook: Any = method
        else:
            key, previous = old
            del module._forward_pre_hooks[key]
            if isinstance(previous, container):
                previous.add_pruning_method(method)
                hook = previous
            else:
                hook = container(previous, method)
        module.register_buffer(name + "_mask", mask)
        if _fsdp.kept_attribute(module, name):  # sharded: computed on demand instead
            setattr(module, name, hook.apply_mask(module))
        module.register_forward_pre_hook(hook)
        _fsdp.attached(module, name)  # DTensors / FSDP2 (last: cannot fail)
    return hook


def _install_fresh(module: nn.Module, name: str, method: Any, mask: torch.Tensor,
                   container: type[Any]) -> bool:
    """:func:`install` on a tensor pruned for the first time, at the cost of the changes
    themselves; False (nothing done) where the general route is needed: a method with its own
    ``apply_mask``, an entry in the way of the new ones, a pruned tensor not kept as an
    attribute (sharded, or asked for on demand).

    All or nothing: the pruned copy ``mask * orig`` is computed first, open to Ctrl-C, when
    nothing has changed yet. The changes to the module follow with Ctrl-C held, each a dict
    entry; the snapshot they need is the original ``Parameter`` and the order of the module's
    parameters. If one raises (a registration hook, say) or a Ctrl-C that arrived meanwhile is
    raised at their end, they are taken back, still held, and the error or the
    ``KeyboardInterrupt`` leaves the module exactly as before; one that arrives after that
    check is raised as the section ends, the call done.
    """
    parameters = module._parameters
    # (``container``, the core's PruningContainer, keeps the base class's apply_mask)
    if not (type(method).apply_mask is container.apply_mask
            and type(mask) is torch.Tensor and _fsdp.kept_attribute(module, name, mask)
            and name + "_orig" not in parameters and name + "_mask" not in module._buffers
            and name not in module.__dict__):
        return False
    orig = parameters[name]
    pruned = method.apply_mask_to(mask, orig)
    entries = _plain_entries(module, name, orig)
    with held_interrupts() as gate:
        order = tuple(parameters)
        hooks_before = len(module._forward_pre_hooks)
        try:
            if entries:  # what Module's methods below would do here, without their lookups
                parameters[name + "_orig"] = orig
                del parameters[name]
                module._buffers[name + "_mask"] = mask
                module._non_persistent_buffers_set.discard(name + "_mask")
                object.__setattr__(module, name, pruned)
            else:
                module.register_parameter(name + "_orig", orig)
                del parameters[name]
                module.register_buffer(name + "_mask", mask)
                # a registration hook may store a value of its own: as torch's, the pruned
                # tensor is the product of what is stored
                stored = parameters[name + "_orig"], module._buffers[name + "_mask"]
                if stored[0] is not orig or stored[1] is not mask:
                    pruned = method.apply_mask_to(stored[1], stored[0])
                setattr(module, name, pruned)
            module.register_forward_pre_hook(method)
            _fsdp.attached(module, name, kept=True)  # FSDP2 (last: cannot fail)
            # A Ctrl-C held meanwhile goes to the handler around: raised there (taken back
            # here first), or held in turn by a section around that goes on (kept).
            gate.check()
        except BaseException:
            _take_back_fresh(module, name, orig, order, hooks_before)
            raise
    return True


#: Where ``Module.register_parameter`` / ``register_buffer`` find the hooks registered for
#: every module (``torch.nn.modules.module.register_module_*_registration_hook``); None if a
#: torch release moves them, and then :func:`_plain_entries` always says no.
_PARAMETER_HOOKS = getattr(_torch_module, "_global_parameter_registration_hooks", None)
_BUFFER_HOOKS = getattr(_torch_module, "_global_buffer_registration_hooks", None)
_Module = nn.Module


def _plain_entries(module: nn.Module, name: str, orig: Any) -> bool:
    """Whether ``register_parameter(name_orig, orig)``, ``register_buffer(name_mask, mask)``
    and ``setattr(module, name, pruned)`` (after ``name`` left the parameters) would each do no
    more than store one entry, so that storing it directly changes the module identically
    (for :func:`_install_fresh`, which has checked that ``name_orig`` is no parameter,
    ``name_mask`` no buffer and ``name`` no instance attribute yet, and makes a plain ``mask``
    and so a plain ``mask * orig``).

    They would when each of those methods is ``nn.Module``'s own (no subclass or class behind
    ``Module`` in the order of lookup overrides one, nor ``__getattribute__``), no registration
    hook is registered for every module, ``orig`` is a leaf ``Parameter``, ``name`` is in no
    other dict of the module and neither new name is taken anywhere: not in the module's dicts
    nor an attribute of its class. Anything else takes Module's methods, with their errors (an
    attribute in the way raises their ``KeyError``), hooks and overrides.

    Those methods' own checks cost more than a first pruning of a small weight computes: each
    looks its new name up with ``hasattr``, and Module's ``__getattr__`` builds an
    ``AttributeError`` to say that it is free.
    """
    if _PARAMETER_HOOKS or _BUFFER_HOOKS or _PARAMETER_HOOKS is None or _BUFFER_HOOKS is None:
        return False
    cls = type(module)
    if (cls.__setattr__ is not _Module.__setattr__ or cls.__getattr__ is not _Module.__getattr__
            or cls.register_parameter is not _Module.register_parameter
            or cls.register_buffer is not _Module.register_buffer
            or cls.__getattribute__ is not object.__getattribute__
            or cls.__mro__[-2] is not _Module):
        return False
    if type(orig) is not nn.Parameter or not orig.is_leaf:
        return False
    state, buffers, modules = module.__dict__, module._buffers, module._modules
    new_orig, new_mask = name + "_orig", name + "_mask"
    return not (name in buffers or name in modules or new_orig in buffers
                or new_mask in module._parameters or new_orig in modules or new_mask in modules
                or new_orig in state or new_mask in state
                or hasattr(cls, new_orig) or hasattr(cls, new_mask))


def _take_back_fresh(module: nn.Module, name: str, orig: nn.Parameter | None,
                     order: tuple[str, ...], hooks_before: int) -> None:
    """Undo what :func:`_install_fresh` did so far (called with Ctrl-C held; none of the
    entries it adds existed before it)."""
    hooks = module._forward_pre_hooks
    while len(hooks) > hooks_before:  # the one it registered: the last
        hooks.popitem()
    module.__dict__.pop(name, None)
    module._buffers.pop(name + "_mask", None)
    parameters = module._parameters
    parameters.pop(name + "_orig", None)
    parameters[name] = orig
    _reorder(parameters, order)
    _fsdp.restored(module, name)


def uninstall(module: nn.Module, name: str, *, keep_pruning: bool = True) -> nn.Parameter:
    """Turn a pruned ``name`` back into a plain parameter (the same ``Parameter`` object).

    With ``keep_pruning`` (what ``remove`` does) the pruned values are written into the original
    parameter in place -- no model-sized temporary. Without it the original values come back
    unchanged (an undo).
    """
    orig = module._parameters[name + "_orig"]
    mask = module._buffers[name + "_mask"]
    if orig is None or mask is None:  # registered as None by hand: nothing to put back
        raise ValueError(problem("remove", f"{name}_orig and {name}_mask", "tensors",
                                 (orig, mask)))
    if keep_pruning:
        with torch.no_grad():
            orig.mul_(mask.to(dtype=orig.dtype))
    if name in module.__dict__:
        delattr(module, name)
    del module._parameters[name + "_orig"]
    del module._buffers[name + "_mask"]
    setattr(module, name, orig)
    _fsdp.detached(module, name)  # DTensors / FSDP2
    return orig

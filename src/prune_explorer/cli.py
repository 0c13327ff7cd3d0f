"""The ``prune-explorer`` command line.

``prune-explorer lab [--dir DIR] [--port N] [--no-browser]``
    Copy the bundled teaching notebooks into a working folder (never over a copy you edited)
    and start JupyterLab on the quickstart notebook, bound to 127.0.0.1 with Jupyter's own
    token authentication.
``prune-explorer report CHECKPOINT [--model M] [--plan PLAN] [--csv OUT]``
    Print the sparsity report (:meth:`Session.report`) of a saved ``state_dict``, after
    applying a JSON plan if one is given.
``prune-explorer apply CHECKPOINT PLAN -o OUT [--commit] [--model M]``
    Apply a JSON plan to a saved ``state_dict`` and save the resulting ``state_dict``.

Checkpoints are read with ``torch.load(weights_only=True)``: plain tensors only, never pickled
code. The architecture comes from ``--model``: a demo model name (``mlp``, ``cnn``) or an
importable ``package.module:factory`` callable that returns the ``nn.Module``. Every output
file is written to a temporary file in the same folder and renamed into place only on
success, so a failed command never leaves a partial file behind.

Errors in the input (missing, corrupt or mismatched files, bad arguments) print one line
``prune-explorer <command>: error: <message>`` on stderr and exit with status 1; usage errors
caught by the argument parser exit with status 2.

Examples
--------
>>> import tempfile, torch
>>> from prune_explorer.demo import load_mlp
>>> folder = tempfile.mkdtemp()
>>> torch.save(load_mlp().state_dict(), f"{folder}/mlp.pt")
>>> main(["report", f"{folder}/mlp.pt", "--model", "mlp"])  # doctest: +ELLIPSIS
Checkpoint: .../mlp.pt
Model:      demo model 'mlp' (DigitsMLP)
      name module_type  shape  numel  zeros sparsity channels_pruned methods
fc1.weight      Linear 128x64   8192      0     0.0%               -       -
...
     TOTAL                  -  17226      0     0.0%               -       -
0
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import io
import os
import pickle
import re
import signal
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch, pandas and the session are imported only by the commands needing them
    import pandas as pd
    import torch
    from torch import nn

    from prune_explorer.session import Plan, Session

__all__ = [
    "DEFAULT_LAB_DIR",
    "QUICKSTART",
    "CLIError",
    "bundled_notebooks",
    "copy_notebooks",
    "lab_command",
    "main",
]

PROG = "prune-explorer"
QUICKSTART = "01_quickstart.ipynb"
DEFAULT_LAB_DIR = "prune-explorer-notebooks"
LOCALHOST = "127.0.0.1"
_MAX_LISTED = 6  # keys shown per kind of state_dict mismatch


class CLIError(Exception):
    """A failure caused by the user's input; printed without a traceback, exit status 1."""


# -- lab ------------------------------------------------------------------------------------------
def bundled_notebooks() -> dict[str, bytes]:
    """The notebooks shipped inside the package, file name -> contents, sorted by name.

    Examples
    --------
    >>> "01_quickstart.ipynb" in bundled_notebooks()
    True
    """
    folder = resources.files("prune_explorer") / "notebooks"
    found = {}
    if folder.is_dir():
        for item in folder.iterdir():
            if item.name.endswith(".ipynb") and item.is_file():
                found[item.name] = item.read_bytes()
    if QUICKSTART not in found:
        raise CLIError(
            f"the package has no bundled {QUICKSTART} in {folder}; reinstall prune-explorer "
            "(the notebooks are package data)"
        )
    return dict(sorted(found.items()))


def copy_notebooks(directory: str | os.PathLike[str]) -> dict[str, str]:
    """Copy the bundled notebooks into ``directory`` without overwriting anything.

    Parameters
    ----------
    directory : path
        Working folder; created (with parents) if missing.

    Returns
    -------
    dict of str to str
        File name -> ``"copied"`` (new file), ``"unchanged"`` (already identical) or
        ``"kept"`` (a different file of that name exists -- your edited copy -- and was left
        alone).

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> copy_notebooks(folder)["01_quickstart.ipynb"]
    'copied'
    >>> copy_notebooks(folder)["01_quickstart.ipynb"]
    'unchanged'
    """
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise CLIError(f"--dir must be a folder; {str(target)!r} is a file")
    notebooks = bundled_notebooks()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"--dir: cannot create folder {str(target)!r} ({exc.strerror})") from None
    status = {}
    for name, data in notebooks.items():
        path = target / name
        try:
            with open(path, "xb") as file:  # exclusive create: an existing file is never replaced
                file.write(data)
            status[name] = "copied"
        except FileExistsError:
            try:
                same = path.is_file() and path.read_bytes() == data
            except OSError:
                same = False
            status[name] = "unchanged" if same else "kept"
        except OSError as exc:
            raise CLIError(f"--dir: cannot write {str(path)!r} ({exc.strerror})") from None
    return status


def lab_command(
    directory: str | os.PathLike[str], port: int | None = None, open_browser: bool = True
) -> list[str]:
    """The command that starts JupyterLab on ``directory`` with the quickstart notebook open.

    Bound to 127.0.0.1; the token Jupyter generates is left in place (it is printed in the
    URL JupyterLab shows). With an explicit ``port`` JupyterLab fails instead of silently
    moving to another port. As root, ``--allow-root`` is added (JupyterLab refuses to start
    otherwise).

    Examples
    --------
    >>> cmd = lab_command("notebooks", port=8899, open_browser=False)
    >>> "--ServerApp.ip=127.0.0.1" in cmd, "--ServerApp.port=8899" in cmd
    (True, True)
    >>> any("token" in part for part in cmd)
    False
    """
    root = Path(directory).resolve()
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.ip={LOCALHOST}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.default_url=/lab/tree/{QUICKSTART}",
    ]
    if port is not None:
        cmd += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if not open_browser:
        cmd.append("--ServerApp.open_browser=False")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def _run_until_exit(cmd: Sequence[str], cwd: Path) -> int:
    # Run JupyterLab as a child; pass SIGTERM/SIGHUP on so stopping this process stops the server
    # (which then shuts its kernels down). Ctrl-C reaches the child directly through the terminal.
    proc = subprocess.Popen(list(cmd), cwd=cwd)
    names = ("SIGTERM", "SIGHUP")
    forwarded = [getattr(signal, name) for name in names if hasattr(signal, name)]
    previous = {}

    def forward(signum: int, _frame: Any) -> None:
        with suppress(ProcessLookupError):
            proc.send_signal(signum)

    with suppress(ValueError):  # signal handlers can only be set in the main thread
        for signum in forwarded:
            previous[signum] = signal.signal(signum, forward)
    try:
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:  # JupyterLab asks for confirmation; keep waiting for it
                continue
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code if code >= 0 else 128 - code


def _cmd_lab(args: argparse.Namespace, out: IO[str]) -> int:
    if importlib.util.find_spec("jupyterlab") is None:
        raise CLIError(
            f"JupyterLab is not installed for {sys.executable}; install it with "
            "`pip install jupyterlab` (or reinstall prune-explorer, which depends on it)"
        )
    directory = Path(args.dir)
    status = copy_notebooks(directory)
    print(f"Notebooks in {directory.resolve()}:", file=out)
    notes = {
        "copied": "copied",
        "unchanged": "already there, unchanged",
        "kept": "kept your edited copy (delete it to get the bundled version back)",
    }
    for name, state in status.items():
        print(f"  {name}: {notes[state]}", file=out)
    cmd = lab_command(directory, args.port, open_browser=not args.no_browser)
    if "--allow-root" in cmd:
        print("Running as root: passing --allow-root to JupyterLab.", file=out)
    where = f"{LOCALHOST}:{args.port}" if args.port else LOCALHOST
    print(
        f"Starting JupyterLab on {where} with {QUICKSTART}. Open the http://{LOCALHOST} URL "
        "it prints below (it carries the access token); stop it with Ctrl-C.",
        file=out,
    )
    out.flush()
    return _run_until_exit(cmd, directory)


# -- reading checkpoints ---------------------------------------------------------------------------
def _check_input_file(path: Path, what: str) -> None:
    if not path.exists():
        raise CLIError(f"{what} {str(path)!r} does not exist")
    if path.is_dir():
        raise CLIError(f"{what} {str(path)!r} is a folder; expected a file")


def _first_line(exc: BaseException) -> str:
    # The exception's type and the first sentence of its message, on one line.
    text = " ".join(str(exc).split())
    cut = text.find(". ")
    text = text[: cut + 1] if 0 < cut < 200 else text[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _refuse_pickled_objects(path: Path, global_name: str) -> CLIError:
    return CLIError(
        f"CHECKPOINT {str(path)!r} holds pickled Python objects (found {global_name}), most "
        "likely a whole model saved with torch.save(model). prune-explorer loads checkpoints "
        "with torch.load(weights_only=True), which refuses pickled classes because unpickling "
        "them can run arbitrary code. Save the weights alone with "
        "torch.save(model.state_dict(), 'model.pt') and pass the architecture with "
        "--model package.module:factory (a function returning the nn.Module) or a demo name"
    )


def _nested_state_dict_hint(obj: Mapping[Any, Any]) -> str:
    import torch

    inner = [
        key
        for key, value in obj.items()
        if isinstance(value, Mapping)
        and value
        and all(isinstance(v, torch.Tensor) for v in value.values())
    ]
    if not inner:
        return ""
    return (
        f"; it looks like a training checkpoint whose weights are under {inner[0]!r}: save "
        f"that entry alone (torch.save(checkpoint[{inner[0]!r}], 'model.pt'))"
    )


def read_state_dict(path: Path) -> Mapping[str, torch.Tensor]:
    """Load a ``state_dict`` with ``torch.load(weights_only=True)``, with readable errors."""
    import torch

    _check_input_file(path, "CHECKPOINT")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
        if found:
            raise _refuse_pickled_objects(path, found.group(1)) from None
        raise CLIError(
            f"CHECKPOINT {str(path)!r} is not a readable PyTorch checkpoint (the weights-only "
            "unpickler rejected its contents); is the file corrupt or not a torch.save file?"
        ) from None
    except PermissionError as exc:
        raise CLIError(f"CHECKPOINT {str(path)!r} cannot be read ({exc.strerror})") from None
    except Exception as exc:
        raise CLIError(
            f"CHECKPOINT {str(path)!r} is not a readable PyTorch checkpoint "
            f"({_first_line(exc)}); is the file truncated, corrupt or not a torch.save file?"
        ) from None
    if not isinstance(obj, Mapping):
        raise CLIError(
            f"CHECKPOINT {str(path)!r} must hold a state_dict (a dict of tensor names to "
            f"tensors); got {type(obj).__name__}"
        )
    bad = [key for key, value in obj.items() if not (isinstance(key, str)
                                                       and isinstance(value, torch.Tensor))]
    if bad:
        raise CLIError(
            f"CHECKPOINT {str(path)!r} must hold a state_dict mapping tensor names to tensors; "
            f"entry {bad[0]!r} is a {type(obj[bad[0]]).__name__}" + _nested_state_dict_hint(obj)
        )
    return obj  # keep the OrderedDict and its _metadata (versions load_state_dict may use)


# -- building the model ----------------------------------------------------------------------------
@contextmanager
def _cwd_importable() -> Iterator[None]:
    # `--model mypkg.models:build` should find modules in the current folder, as `python -m` does.
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added:
            with suppress(ValueError):
                sys.path.remove(cwd)


_FACTORY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def _model_from_factory(spec: str) -> nn.Module:
    from torch import nn

    module_name, _, attr_path = spec.partition(":")
    with _cwd_importable():
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise CLIError(
                f"--model {spec!r}: cannot import module {module_name!r} ({_first_line(exc)}); "
                "is it installed or in the current folder?"
            ) from None
        except Exception as exc:
            raise CLIError(
                f"--model {spec!r}: importing {module_name!r} failed ({_first_line(exc)})"
            ) from None
    factory: Any = module
    for part in attr_path.split("."):
        if not hasattr(factory, part):
            raise CLIError(f"--model {spec!r}: {module_name!r} has no attribute {attr_path!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise CLIError(
            f"--model {spec!r}: {attr_path} must be callable (a class or a function taking no "
            f"arguments); got {type(factory).__name__}"
        )
    try:
        model = factory()
    except Exception as exc:
        raise CLIError(f"--model {spec!r}: calling {attr_path}() failed ({_first_line(exc)})") \
            from None
    if not isinstance(model, nn.Module):
        raise CLIError(
            f"--model {spec!r}: {attr_path}() must return a torch.nn.Module; "
            f"got {type(model).__name__}"
        )
    return model


def _plain_keys(state: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    # Key -> shape, with each pruned pair `x_orig`/`x_mask` folded back into `x`.
    keys = {}
    for key, value in state.items():
        for suffix in ("_orig", "_mask"):
            base = key[: -len(suffix)]
            other = "_mask" if suffix == "_orig" else "_orig"
            if key.endswith(suffix) and base + other in state:
                key = base
                break
        keys[key] = tuple(value.shape)
    return keys


def _infer_demo(state: Mapping[str, torch.Tensor]) -> str | None:
    from prune_explorer.demo import DEMO_MODELS, untrained_model

    wanted = _plain_keys(state)
    for name in DEMO_MODELS:
        reference = {k: tuple(v.shape) for k, v in untrained_model(name).state_dict().items()}
        if reference == wanted:
            return name
    return None


def build_model(spec: str | None, state: Mapping[str, torch.Tensor]) -> tuple[nn.Module, str]:
    """The module ``--model`` names, with fresh weights, and a description for messages."""
    from prune_explorer.demo import DEMO_MODELS, untrained_model

    if spec is None:
        spec = _infer_demo(state)
        if spec is None:
            raise CLIError(
                "--model is needed: the checkpoint's keys match no demo model; pass --model "
                f"{' or --model '.join(DEMO_MODELS)} or --model package.module:factory "
                "(an importable function or class returning the nn.Module the state_dict "
                "was saved from)"
            )
        model = untrained_model(spec)
        return model, f"demo model {spec!r} ({type(model).__name__}; matched by its keys)"
    if spec in DEMO_MODELS:
        model = untrained_model(spec)
        return model, f"demo model {spec!r} ({type(model).__name__})"
    if not _FACTORY.match(spec):
        raise CLIError(
            f"--model must be {', '.join(repr(n) for n in DEMO_MODELS)} or "
            f"'package.module:factory'; got {spec!r}"
        )
    model = _model_from_factory(spec)
    return model, f"{spec} ({type(model).__name__})"


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def load_weights(
    model: nn.Module, state: Mapping[str, torch.Tensor], path: Path, described: str
) -> None:
    """Load ``state`` into ``model`` strictly; re-create pruning saved as ``_orig``/``_mask``.

    A tensor saved while pruned (``fc1.weight_orig`` + ``fc1.weight_mask``) is pruned again
    with ``custom_from_mask`` so the keys line up; its history (which method made the mask) is
    not in the file, so reports list it as ``custom_from_mask``.
    """
    import torch

    from prune_explorer import prune

    params = dict(model.named_parameters())
    problems = []
    for key in state:
        base = key[: -len("_orig")]
        if not (key.endswith("_orig") and base + "_mask" in state and base in params):
            continue
        if base in state:
            continue
        mask = state[base + "_mask"]
        if tuple(mask.shape) != tuple(params[base].shape):
            continue  # reported as a shape mismatch below
        module_name, _, tensor_name = base.rpartition(".")
        try:
            prune.custom_from_mask(model.get_submodule(module_name), tensor_name, mask=mask)
        except Exception as exc:
            problems.append(f"the mask {base}_mask cannot be re-applied ({_first_line(exc)})")
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    shapes = [
        f"{k} is {tuple(state[k].shape)} in the file but {tuple(expected[k].shape)} in the model"
        for k in expected
        if k in state and state[k].shape != expected[k].shape
    ]
    if missing:
        problems.append(f"missing keys {_listed(missing)}")
    if unexpected:
        problems.append(f"unexpected keys {_listed(unexpected)}")
    problems += shapes[:_MAX_LISTED]
    if problems:
        raise CLIError(
            f"CHECKPOINT {str(path)!r} does not fit {described}: " + "; ".join(problems)
            + ". Does --model name the architecture the state_dict was saved from?"
        )
    try:
        model.load_state_dict(state)
    except Exception as exc:
        raise CLIError(
            f"CHECKPOINT {str(path)!r} does not fit {described} ({_first_line(exc)})"
        ) from None
    # The pruned copy (`weight` = orig * mask) is refreshed on each forward; refresh it now.
    with torch.no_grad():
        for key in state:
            if key.endswith("_orig") and key[: -len("_orig")] + "_mask" in state:
                base = key[: -len("_orig")]
                module_name, _, tensor_name = base.rpartition(".")
                module = model.get_submodule(module_name)
                orig = getattr(module, tensor_name + "_orig")
                setattr(module, tensor_name, orig * getattr(module, tensor_name + "_mask"))


# -- plans -----------------------------------------------------------------------------------------
def read_plan(path: Path, what: str) -> Plan:
    """Read a JSON plan, turning every failure into a :class:`CLIError` naming ``what``."""
    from prune_explorer.session import Plan

    _check_input_file(path, what)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CLIError(f"{what} {str(path)!r} cannot be read ({exc.strerror})") from None
    try:
        return Plan.from_json(data)  # the one parser: decoding, JSON and the plan format
    except ValueError as exc:
        raise CLIError(f"{what} {str(path)!r} is not a valid plan: {exc}") from None


def apply_plan(plan: Plan, model: nn.Module, plan_path: Path, ckpt_path: Path) -> Session:
    """Apply ``plan`` to ``model`` all-or-nothing; errors name both files."""
    try:
        return plan.apply(model)
    except (ValueError, TypeError, RuntimeError, KeyError, IndexError) as exc:
        raise CLIError(
            f"plan {str(plan_path)!r} does not fit the model of CHECKPOINT "
            f"{str(ckpt_path)!r}: {exc}"
        ) from None


# -- writing outputs -------------------------------------------------------------------------------
def _check_output(path: Path, what: str) -> None:
    if path.is_dir():
        raise CLIError(f"{what} {str(path)!r} is a folder; expected a file name")
    folder = path.absolute().parent
    if not folder.is_dir():
        raise CLIError(f"{what} {str(path)!r}: folder {str(folder)!r} does not exist")


def write_atomically(path: Path, data: bytes, what: str) -> None:
    """Write ``data`` to a temporary file next to ``path``, then rename it over ``path``.

    On any failure the temporary file is removed and ``path`` is left as it was.
    """
    _check_output(path, what)
    tmp = path.absolute().parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "xb") as file:  # plain open: the file mode follows the user's umask
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with suppress(OSError):
            tmp.unlink()
        raise CLIError(f"{what} {str(path)!r} cannot be written ({exc.strerror})") from None
    except BaseException:
        with suppress(OSError):
            tmp.unlink()
        raise


def _state_dict_bytes(model: nn.Module) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, buffer)
    return buffer.getvalue()


# -- report / apply --------------------------------------------------------------------------------
@dataclass
class _Loaded:
    model: nn.Module
    described: str


def _load(checkpoint: Path, spec: str | None) -> _Loaded:
    state = read_state_dict(checkpoint)
    model, described = build_model(spec, state)
    load_weights(model, state, checkpoint, described)
    return _Loaded(model.eval(), described)


def _printable(report: pd.DataFrame) -> pd.DataFrame:
    shown = report.copy()
    shown["shape"] = [
        "x".join(str(s) for s in shape) if shape else "-" for shape in shown["shape"]
    ]
    shown["sparsity"] = [f"{value:.1%}" for value in shown["sparsity"]]
    shown["channels_pruned"] = [
        ", ".join(f"dim{d}: {n}" for d, n in value.items() if n) or "-"
        if isinstance(value, Mapping) else ""
        for value in shown["channels_pruned"]
    ]
    shown["methods"] = [
        " + ".join(value) or "-" if isinstance(value, tuple) else "" for value in shown["methods"]
    ]
    return shown


def _csv_bytes(report: pd.DataFrame) -> bytes:
    table = report.copy()
    table["shape"] = [" x ".join(map(str, s)) for s in table["shape"]]
    table["channels_pruned"] = [
        ";".join(f"{d}:{n}" for d, n in value.items()) for value in table["channels_pruned"]
    ]
    table["methods"] = ["+".join(value) for value in table["methods"]]
    return table.to_csv(index=False).encode("utf-8")


def _cmd_report(args: argparse.Namespace, out: IO[str]) -> int:
    checkpoint = Path(args.checkpoint)
    csv_path = Path(args.csv) if args.csv else None
    if csv_path is not None:
        _check_output(csv_path, "--csv")
    loaded = _load(checkpoint, args.model)
    plan = read_plan(Path(args.plan), "--plan") if args.plan else None
    if plan is not None:
        session = apply_plan(plan, loaded.model, Path(args.plan), checkpoint)
    else:
        from prune_explorer.session import Session

        session = Session(loaded.model)
    report = session.report()
    print(f"Checkpoint: {checkpoint}", file=out)
    print(f"Model:      {loaded.described}", file=out)
    if plan is not None:
        print(f"Plan:       {args.plan} ({len(plan)} step{'s' * (len(plan) != 1)} applied)",
              file=out)
    print(_printable(session.report(totals=True)).to_string(index=False), file=out)
    if csv_path is not None:
        write_atomically(csv_path, _csv_bytes(report), "--csv")
        print(f"Wrote {csv_path} ({len(report)} rows, columns {', '.join(report.columns)})",
              file=out)
    return 0


def _cmd_apply(args: argparse.Namespace, out: IO[str]) -> int:
    checkpoint, plan_path, output = Path(args.checkpoint), Path(args.plan), Path(args.output)
    _check_output(output, "-o/--output")
    loaded = _load(checkpoint, args.model)
    plan = read_plan(plan_path, "PLAN")
    session = apply_plan(plan, loaded.model, plan_path, checkpoint)
    committed: tuple[str, ...] = ()
    if args.commit:
        committed = session.commit().names
    totals = session.report(totals=True).iloc[-1]
    data = _state_dict_bytes(loaded.model)
    write_atomically(output, data, "-o/--output")
    steps = len(plan)
    print(f"Applied {steps} step{'s' * (steps != 1)} of {plan_path} to {checkpoint}; "
          f"model: {loaded.described}.", file=out)
    print(f"Sparsity over all tensors: {totals['sparsity']:.1%} "
          f"({int(totals['zeros']):,} of {int(totals['numel']):,} entries are 0).", file=out)
    pruned = [n for n in session.names if session.methods(n)]
    if args.commit:
        print(f"Wrote {output}: pruning made permanent for {len(committed)} tensors "
              "(plain state_dict, loads into the unpruned model).", file=out)
    else:
        print(f"Wrote {output}: {len(pruned)} pruned tensors kept as <name>_orig + <name>_mask "
              "pairs (undoable; `prune-explorer report` reads them; --commit makes pruning "
              "permanent).", file=out)
    return 0


# -- parser ----------------------------------------------------------------------------------------
def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, 65535]; got {text!r}") \
            from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, 65535]; got {value}")
    return value


_MODEL_HELP = (
    "architecture of the checkpoint: 'mlp' or 'cnn' (the demo models) or "
    "'package.module:factory', an importable callable returning the nn.Module (the current "
    "folder is importable). Default: the demo model whose keys match"
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``prune-explorer`` (see the module docstring)."""
    from prune_explorer import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Explore, teach and plan neural-network pruning in PyTorch.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    lab = commands.add_parser(
        "lab",
        help="open the teaching notebooks in JupyterLab",
        description="Copy the bundled notebooks into a working folder (never over an edited "
        "copy) and start JupyterLab on the quickstart notebook, on 127.0.0.1 with token "
        "authentication.",
    )
    lab.add_argument("--dir", default=DEFAULT_LAB_DIR,
                     help=f"working folder for the notebooks (default: ./{DEFAULT_LAB_DIR})")
    lab.add_argument("--port", type=_port, default=None,
                     help="port to serve on (default: JupyterLab's, 8888 or the next free one)")
    lab.add_argument("--no-browser", action="store_true", help="do not open a web browser")

    report = commands.add_parser(
        "report",
        help="print the sparsity report of a saved state_dict",
        description="Print one row per tensor (shape, zeros, sparsity, fully pruned channels, "
        "methods) of a state_dict saved with torch.save(model.state_dict(), path), after "
        "applying a JSON plan if --plan is given. Pruning saved as <name>_orig/<name>_mask "
        "pairs is read back and listed as custom_from_mask.",
    )
    report.add_argument("checkpoint", metavar="CHECKPOINT", help="state_dict file (.pt)")
    report.add_argument("--model", help=_MODEL_HELP)
    report.add_argument("--plan", help="JSON plan to apply first (exported by the explorer)")
    report.add_argument("--csv", help="also write the report to this CSV file")

    apply = commands.add_parser(
        "apply",
        help="apply a JSON plan to a saved state_dict and save the result",
        description="Apply a JSON plan to the model in CHECKPOINT and save its state_dict to "
        "OUTPUT. Without --commit pruned tensors are saved as <name>_orig + <name>_mask (as "
        "torch.nn.utils.prune leaves them); with --commit pruning is made permanent "
        "(prune.remove) and the keys are those of the unpruned model.",
    )
    apply.add_argument("checkpoint", metavar="CHECKPOINT", help="state_dict file (.pt)")
    apply.add_argument("plan", metavar="PLAN", help="JSON plan (exported by the explorer)")
    apply.add_argument("-o", "--output", required=True, help="where to save the state_dict")
    apply.add_argument("--commit", action="store_true",
                       help="make pruning permanent (prune.remove) before saving")
    apply.add_argument("--model", help=_MODEL_HELP)
    return parser


_COMMANDS: dict[str, Callable[[argparse.Namespace, IO[str]], int]] = {
    "lab": _cmd_lab,
    "report": _cmd_report,
    "apply": _cmd_apply,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``prune-explorer`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 on success, 1 when the input is wrong (message on stderr, no output file written),
    2 for usage errors reported by the argument parser.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return _COMMANDS[args.command](args, sys.stdout)
    except CLIError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

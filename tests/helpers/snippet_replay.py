"""Run exported snippets on stock torch, in one fresh interpreter: the snippet tests' one harness.

Each case is a model (pickled whole with ``torch.save``, so its class must be importable in the
child: torch's own classes or ``helpers.session_models``) and a snippet. The child puts the
tests folder on ``sys.path``, execs each snippet with ``model`` bound, records the resulting
``state_dict`` (or the error the snippet raised), and checks that ``prune_explorer`` was never
imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

TESTS = Path(__file__).resolve().parents[1]  # the folder holding ``helpers``

CHILD = textwrap.dedent(
    """
    import json, sys, torch
    sys.path.insert(0, sys.argv[3])
    cases = json.load(open(sys.argv[1]))
    results, errors = {}, {}
    for case in cases:
        model = torch.load(case["model"], weights_only=False)
        path = case["snippet"]
        try:
            exec(compile(open(path, encoding="utf-8").read(), path, "exec"), {"model": model})
        except Exception as err:
            errors[case["id"]] = f"{type(err).__name__}: {err}"
        results[case["id"]] = {k: v.clone() for k, v in model.state_dict().items()}
    assert "prune_explorer" not in sys.modules, "the snippet must not need prune_explorer"
    torch.save({"results": results, "errors": errors}, sys.argv[2])
    """
)


@dataclass(frozen=True)
class Replay:
    """What the child saw: state dicts per case id, the errors snippets raised, its output."""

    results: dict[str, dict[str, torch.Tensor]]
    errors: dict[str, str]
    output: str


def replay_on_stock_torch(tmp: Path, cases: dict[str, tuple[nn.Module, str]],
                          timeout: float = 300) -> Replay:
    """Exec each ``(model, snippet)`` of ``cases`` on stock torch in one fresh interpreter.

    The models are saved before anything runs, so the caller may keep using its own copies.
    """
    listing = []
    for number, (case_id, (model, snippet)) in enumerate(cases.items()):
        model_path, snippet_path = tmp / f"m{number}.pt", tmp / f"s{number}.py"
        torch.save(model, model_path)
        snippet_path.write_text(snippet, encoding="utf-8")
        listing.append({"id": case_id, "model": str(model_path), "snippet": str(snippet_path)})
    (tmp / "cases.json").write_text(json.dumps(listing))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp / "cases.json"), str(tmp / "out.pt"), str(TESTS)],
        capture_output=True, text=True, timeout=timeout, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = torch.load(tmp / "out.pt", weights_only=True)
    return Replay(out["results"], out["errors"], done.stdout + done.stderr)


def assert_same_state_dict(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]
                           ) -> None:
    """``got`` (a replayed ``state_dict``) has ``expected``'s keys, and per key its dtype and
    values, bit for bit."""
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert got[key].dtype == value.dtype, key
        assert torch.equal(got[key], value), key

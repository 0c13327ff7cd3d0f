"""Issue 9, items 1 and 8: no name runs as code in a snippet; large masks go in compact and checked.

Every hostile name of a generated corpus (each control character, the Unicode line and paragraph
separators, quotes, backslashes, keywords, ``__import__``...) is used both as a ``ModuleDict`` key
and as a parameter name of a real model. A session prunes it with every kind of step, the plan's
snippet is written out, and all snippets are executed on stock torch in ONE fresh interpreter
(not importing prune_explorer). Each name carries a payload that would print a marker if it ran.
Checked: every snippet parses, every line of it is printable (no line break hides in a comment),
no marker is printed, and the resulting state_dict equals the session's, tensor for tensor.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import tokenize
from io import StringIO
from pathlib import Path

import pytest
import torch
from torch import nn

from helpers.snippet_replay import replay_on_stock_torch
from prune_explorer.session import PackedMask, Plan, Session
from prune_explorer.session.codegen.pysource import py_comment, py_str
from prune_explorer.session.codegen.snippet import MAX_LISTED

MARKER = "PWNED"
PAYLOAD = f"print('{MARKER}')"

LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
               "\u2029"]
ODD_CHARS = [chr(c) for c in [*range(0x20), 0x7F]] + [
    "\x85", "\u2028", "\u2029", "\u202e", "\u2066", "\ufeff", "\u200b", "\xa0", "\ud800",
]
OTHER_NAMES = [
    "import", "class", "None", "lambda", "__import__", "__builtins__", "model", "torch", "prune",
    "mask", "module", "unpack_mask", "ｗeight", "é😀", " ", "#", "a#b", "{model}", "%s", "\\",
    "a\\", "\\n", '"', "'", '"""', "'''", '\\"', f'x"); {PAYLOAD}; ("', f"x'); {PAYLOAD}; ('",
    f"x\"\"\"\n{PAYLOAD}\n\"\"\"", f"__import__('os');{PAYLOAD}",
]
CORPUS = [f"x{ch}{PAYLOAD}{ch}#" for ch in ODD_CHARS] + [f"x\r\n{PAYLOAD}\r\n#", *OTHER_NAMES]


def hostile_model(name: str) -> nn.Module:
    """A model with ``name`` as a ModuleDict key (``d``) and as a parameter name (``p``)."""
    torch.manual_seed(0)
    model = nn.Module()
    model.d = nn.ModuleDict({name: nn.Linear(6, 4)})
    holder = nn.Module()
    holder.register_parameter(name, nn.Parameter(torch.randn(32, 32)))
    model.p = holder
    return model


def prune_everything(s: Session, name: str) -> None:
    gen = torch.Generator().manual_seed(1)
    many = torch.ones(1024, dtype=torch.bool)
    many[torch.randperm(1024, generator=gen)[: MAX_LISTED + 100]] = False  # encoded as bits
    s.apply(f"d.{name}.weight", "l1_unstructured", amount=0.5)
    s.apply(f"p.{name}", "random_unstructured", amount=0.25)
    s.apply(f"p.{name}", "custom_from_mask", mask=many.view(32, 32))
    s.apply(f"d.{name}.weight", "custom_from_mask", mask=torch.rand(4, 6, generator=gen) > 0.5)
    s.apply_global([f"d.{name}.weight", f"p.{name}"], "random_unstructured", amount=0.3)
    s.apply(f"d.{name}.weight", "ln_structured", amount=1, n=float("inf"), dim=0)
    s.apply(f"d.{name}.bias", "l1_unstructured", amount=1)
    s.commit([f"d.{name}.bias"])


def run_on_stock_torch(tmp: Path, cases: dict[str, tuple[nn.Module, str]]) -> tuple[dict, dict]:
    """Exec each (model, snippet) in one fresh interpreter; return (state_dicts, errors)."""
    replay = replay_on_stock_torch(tmp, cases)
    assert MARKER not in replay.output, "a name ran as code"
    return replay.results, replay.errors


def assert_safe_source(source: str) -> None:
    ast.parse(source)
    # Every line is printable: nothing inside can end a comment or a line for any reader.
    lines = source.split("\n")
    assert lines[-1] == ""
    assert all(line.isprintable() for line in lines), [ln for ln in lines if not ln.isprintable()]
    assert source.splitlines() == lines[:-1]
    # The tokenizer sees the same lines, and every comment sits on a line of its own making.
    tokens = list(tokenize.generate_tokens(StringIO(source).readline))
    assert max(token.end[0] for token in tokens) == len(lines)


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    sessions, cases = {}, {}
    for number, name in enumerate(CORPUS):
        model = hostile_model(name)
        s = Session(copy.deepcopy(model), seed=number)
        prune_everything(s, name)
        snippet = s.plan.to_snippet()
        sessions[f"name{number}"] = (s, snippet)
        cases[f"name{number}"] = (model, snippet)
    # The plan of the issue, loaded from JSON: the target's tensor name holds the line breaks.
    tensor = f"weight\n{PAYLOAD}\n#"
    model = nn.Module()
    model.fc = nn.Module()
    model.fc.register_parameter(tensor, nn.Parameter(torch.arange(12.0).reshape(3, 4)))
    plan = Plan.from_json(json.dumps({
        "format": "prune-explorer-plan", "version": 1,
        "steps": [{"method": "l1_unstructured", "target": f"fc.{tensor}", "amount": 0.5}]}))
    s = plan.apply(copy.deepcopy(model))
    sessions["json"] = (s, plan.to_snippet())
    cases["json"] = (model, plan.to_snippet())
    results, errors = run_on_stock_torch(tmp, cases)
    return sessions, results, errors


def test_the_corpus_is_hostile():
    # The corpus holds each line break that Python or str.splitlines() knows, and NUL.
    for brk in [*LINE_BREAKS, "\x00"]:
        assert any(brk in name for name in CORPUS), repr(brk)


@pytest.mark.parametrize("case", [f"name{i}" for i in range(len(CORPUS))] + ["json"])
def test_hostile_names_never_run_and_masks_are_exact(hostile_runs, case):
    sessions, results, errors = hostile_runs
    s, snippet = sessions[case]
    assert_safe_source(snippet)
    assert case not in errors, errors.get(case)
    expected = s.model.state_dict()
    got = results[case]
    assert sorted(got) == sorted(expected)
    n_masks = 0
    for key, value in expected.items():
        assert torch.equal(got[key], value), key
        n_masks += key.endswith("_mask")
    assert n_masks >= 1
    # The plan says the same after a JSON round trip, and so does its snippet.
    # (The "json" case's own snippet is of a version-1 file, which lists no ties: it finds them
    # on the model when it runs; the session's plan lists them, none here.)
    again = Plan.from_json(s.plan.to_json())
    assert again == s.plan
    assert again.to_snippet() == s.plan.to_snippet()
    assert case == "json" or snippet == s.plan.to_snippet()


@pytest.mark.parametrize("text", CORPUS)
def test_py_str_is_one_printable_line_that_evaluates_back(text):
    literal = py_str(text)
    assert literal.isprintable()
    assert ast.literal_eval(literal) == text
    plain = text.isascii() and text.replace("_", "a").replace(".", "a").isalnum()
    assert py_comment(text) == (text if plain else literal)


def test_plain_addresses_read_as_they_are_in_comments():
    assert py_comment("features.0.weight") == "features.0.weight"
    assert py_comment("features 0") == '"features 0"'


# -- item 8: large custom masks ------------------------------------------------------------------
def _big_masks():
    gen = torch.Generator().manual_seed(5)
    noise = torch.rand(512, 512, generator=gen) > 0.5  # incompressible
    blocks = torch.ones(512, 512, dtype=torch.bool)
    blocks[:, ::4] = False  # compresses well
    return {"noise": noise, "blocks": blocks}


@pytest.fixture(scope="module")
def big_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("big")
    sessions, cases = {}, {}
    for kind, mask in _big_masks().items():
        model = nn.Sequential(nn.Linear(512, 512))
        s = Session(copy.deepcopy(model))
        s.apply("0.weight", "custom_from_mask", mask=mask)
        snippet = s.plan.to_snippet()
        sessions[kind], cases[kind] = (s, snippet), (model, snippet)
    # Tampered copies of the noise snippet: one payload character, the checksum, a lost line.
    model, snippet = cases["noise"]
    lines = snippet.split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("mask = unpack_mask("))
    payload_line = lines[first + 5]
    flipped = payload_line[:10] + ("A" if payload_line[10] != "A" else "B") + payload_line[11:]
    digest_line = next(i for i, line in enumerate(lines)
                       if re.fullmatch(r'    "[0-9a-f]{64}",', line))
    tampered = {
        "flip": [*lines[: first + 5], flipped, *lines[first + 6:]],
        "digest": [*lines[:digest_line], '    "' + "0" * 64 + '",', *lines[digest_line + 1:]],
        "drop": [*lines[: first + 5], *lines[first + 6:]],
    }
    for kind, source in tampered.items():
        cases[f"tampered-{kind}"] = (model, "\n".join(source))
    results, errors = run_on_stock_torch(tmp, cases)
    return sessions, results, errors


@pytest.mark.parametrize("kind", ["noise", "blocks"])
def test_large_custom_mask_is_compact_and_exact_on_stock_torch(big_runs, kind):
    sessions, results, errors = big_runs
    s, snippet = sessions[kind]
    assert kind not in errors, errors.get(kind)
    mask = s.model[0].weight_mask
    packed_bytes = len(PackedMask.from_tensor(mask).to_bytes())  # 32 KiB of bits
    assert "unpack_mask(" in snippet
    assert len(snippet.encode()) <= 1.5 * packed_bytes + 4096
    assert_safe_source(snippet)
    assert torch.equal(results[kind]["0.weight_mask"], mask)
    assert torch.equal(results[kind]["0.weight_orig"], s.model[0].weight_orig)
    imports = [node for node in ast.walk(ast.parse(snippet))
               if isinstance(node, (ast.Import, ast.ImportFrom))]
    modules = sorted(alias.name if isinstance(node, ast.Import) else node.module
                     for node in imports for alias in node.names)
    assert modules == ["base64", "hashlib", "torch", "torch.nn.utils", "zlib"]


def test_compressible_masks_take_little_room(big_runs):
    sessions, _, _ = big_runs
    assert len(sessions["blocks"][1]) < 4096


@pytest.mark.parametrize("kind", ["flip", "digest", "drop"])
def test_a_tampered_mask_is_refused_and_nothing_is_pruned(big_runs, kind):
    _, results, errors = big_runs
    assert "does not match its sha256" in errors[f"tampered-{kind}"]
    assert "0.weight_mask" not in results[f"tampered-{kind}"]


def test_small_masks_stay_readable_index_lists():
    mask = torch.ones(40, 40, dtype=torch.bool)
    mask.view(-1)[: MAX_LISTED] = False
    s = Session(nn.Sequential(nn.Linear(40, 40)))
    s.apply("0.weight", "custom_from_mask", mask=mask)
    snippet = s.plan.to_snippet()
    assert "unpack_mask" not in snippet
    assert "mask[[" in snippet
    assert "import zlib" not in snippet

"""Words and numbers for people (``prune_explorer.session.analysis.wording``): plural, percentages,
separators, steps as sentences, display tables and the printed form of the session's reports."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

from prune_explorer.session import Session, Step
from prune_explorer.session.analysis.frames import COMPARE_COLUMNS, REPORT_COLUMNS
from prune_explorer.session.analysis.wording import (
    ReportFrame,
    count,
    describe_change,
    describe_rounding,
    describe_step,
    display_table,
    noun,
    percent,
    plural,
)
from prune_explorer.session.steps.methods import METHODS


@pytest.mark.parametrize(("n", "singular", "expected"), [
    (0, "entry", "0 entries"),
    (1, "entry", "1 entry"),
    (2, "entry", "2 entries"),
    (8192, "entry", "8,192 entries"),
    (1, "step", "1 step"),
    (3, "step", "3 steps"),
    (1, "tensor", "1 tensor"),
    (1, "slice along dim 0", "1 slice along dim 0"),
    (4, "slice along dim 0", "4 slices along dim 0"),
    (4, "kernel row (dim 2)", "4 kernel rows (dim 2)"),
    (1234567, "entry over 3 tensors", "1,234,567 entries over 3 tensors"),
    (2, "box", "2 boxes"),
    (2, "day", "2 days"),
])
def test_plural_counts_with_separators_and_the_right_form(n, singular, expected):
    assert plural(n, singular) == expected


def test_noun_count_and_percent():
    assert (noun(1, "entry"), noun(5, "entry")) == ("entry", "entries")
    assert count(16384) == "16,384"
    assert percent(0.557739) == "55.8%"
    assert percent(1.0) == "100.0%"
    assert percent(0.0) == "0.0%"


def _one_step_per_method() -> list[Step]:
    steps = [
        Step("identity", "0.weight"),
        Step("random_unstructured", "0.weight", amount=0.3, seed=1655000000),
        Step("l1_unstructured", "0.weight", amount=0.5),
        Step("random_structured", "0.weight", amount=2, dim=0, seed=7),
        Step("ln_structured", "0.weight", amount=0.25, n=1, dim=1),
        Step("semi_structured", "0.weight", pattern="2:4", dim=-1),
        Step("block_structured", "0.weight", amount=0.5, block=(4, 4), n=1),
        Step("global_unstructured", ["0.weight", "1.weight"],
             pruning_method="l1_unstructured", amount=0.6),
        Step("remove", "0.weight"),
        Step("wanda_rows", "0.weight", sparsity="2:4"),
        Step("sparsegpt", "0.weight", sparsity=0.5),
    ]
    session = Session(nn.Sequential(nn.Linear(4, 4)))
    session.apply("0.weight", "custom_from_mask", mask=torch.ones(4, 4))
    steps.append(session.steps[-1])
    return steps


def test_every_method_reads_as_words_not_code():
    steps = _one_step_per_method()
    assert {s.method for s in steps} == set(METHODS)
    for step in steps:
        text = describe_step(step)
        assert "Step(" not in text, text
        assert "_" not in text, text
        assert "0.weight" in text or "2 tensors" in text, text


@pytest.mark.parametrize(("step", "expected"), [
    (Step("l1_unstructured", "fc1.weight", amount=0.5), "L1 magnitude, 50% of fc1.weight"),
    (Step("l1_unstructured", "fc1.weight", amount=0.125), "L1 magnitude, 12.5% of fc1.weight"),
    (Step("l1_unstructured", "fc1.weight", amount=1), "L1 magnitude, 1 entry of fc1.weight"),
    (Step("random_unstructured", "fc1.weight", amount=0.3, seed=1655000000),
     "random, 30% of fc1.weight (seed 1655000000)"),
    (Step("ln_structured", "c.weight", amount=2, n=2, dim=0),
     "Ln-norm structured (n=2, dim=0), 2 slices along dim 0 of c.weight"),
    (Step("ln_structured", "c.weight", amount=0.5, n=math.inf, dim=1),
     "Ln-norm structured (n=inf, dim=1), 50% of c.weight"),
    (Step("global_unstructured", ["a.weight", "b.weight", "c.weight"],
          pruning_method="random_unstructured", amount=0.6, seed=3),
     "global random, 60% over 3 tensors (seed 3)"),
    (Step("semi_structured", "a.weight", pattern="2:4", dim=-1), "2:4 semi-structured on a.weight"),
    (Step("l1_unstructured", "fc1.weight", amount=0.5, importance="wanda"),
     "L1 magnitude, 50% of fc1.weight, scored by wanda"),
    (Step("sparsegpt", "fc1.weight", sparsity=0.8),
     "SparseGPT (prune and update), 80% of fc1.weight"),
])
def test_describe_step_sentences(step, expected):
    assert describe_step(step) == expected


def test_describe_step_with_what_it_did():
    step = Step("l1_unstructured", "fc1.weight", amount=0.5)
    assert describe_step(step, pruned=8192, sparsity=0.5) == (
        "L1 magnitude, 50% of fc1.weight: 8,192 entries pruned (now 50.0% of fc1.weight pruned)")
    assert describe_step(step, pruned=1) == "L1 magnitude, 50% of fc1.weight: 1 entry pruned"
    assert describe_step(step, pruned=-3, sparsity=0.0) == (
        "L1 magnitude, 50% of fc1.weight: 3 entries restored (now 0.0% of fc1.weight pruned)")


def test_describe_change_sums_over_the_tensors_of_the_steps():
    step = Step("global_unstructured", ["a", "b"], pruning_method="l1_unstructured", amount=0.5)
    text = describe_change("Applied", [step], {"a": 1, "c": 9}, {"a": 3, "b": 2, "c": 9},
                           {"a": 4, "b": 4, "c": 10})
    assert text == ("Applied global L1 magnitude, 50% over 2 tensors: 4 entries pruned "
                    "(now 62.5% of these 2 tensors pruned).")


def test_describe_rounding():
    assert describe_rounding(0.3, 96, "entry", 29) == (
        "30% of 96 entries left = 28.8, rounded to 29")
    assert describe_rounding(0.5, 1, "channel along dim 0", 0) == (
        "50% of 1 channel along dim 0 left = 0.5, rounded to 0")
    assert describe_rounding(1, 1, "entry", 1) == "1 of 1 entry left"
    assert describe_rounding(None, 9, "entry", 1) == "prunes 1 entry"


def test_display_table_is_text_for_people():
    frame = pd.DataFrame({
        "name": ["fc1.weight", "TOTAL"],
        "numel": [65536, 65536],
        "seed": [None, 1655000000],  # pandas makes this float64: nan and 1.655e+09
        "sparsity_global": [0.557739, 0.5],
        "collapsed_local": [False, True],
        "settings": [{"amount": 0.5}, {}],
    })
    assert frame["seed"].dtype == "float64"
    shown = display_table(frame)
    assert list(shown.columns) == ["Tensor", "Entries", "Seed", "Sparsity (global)",
                                   "Collapses (local)", "Settings"]
    assert shown.to_dict("records") == [
        {"Tensor": "fc1.weight", "Entries": "65,536", "Seed": "", "Sparsity (global)": "55.8%",
         "Collapses (local)": "No", "Settings": "amount=0.5"},
        {"Tensor": "TOTAL", "Entries": "65,536", "Seed": "1655000000",
         "Sparsity (global)": "50.0%", "Collapses (local)": "Yes", "Settings": ""},
    ]
    text = shown.to_string()
    for raw in ("nan", "e+09", "True", "False", "0.557739"):
        assert raw not in text
    assert frame["sparsity_global"].tolist() == [0.557739, 0.5]  # the frame is unchanged


def _pruned_session() -> Session:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(100, 100), nn.ReLU(), nn.Linear(100, 10))
    session = Session(model)
    session.apply("0.weight", "l1_unstructured", amount=0.557739)
    return session


def test_report_keeps_its_columns_dtypes_and_values_and_prints_for_people():
    session = _pruned_session()
    report = session.report(totals=True)
    assert isinstance(report, pd.DataFrame)
    assert list(report.columns) == REPORT_COLUMNS
    assert report["sparsity"].dtype == "float64"
    assert report["numel"].dtype == "int64"
    sparsity = float(report.loc[0, "sparsity"])
    assert sparsity == 5577 / 10000  # the value itself: a fraction
    assert report.loc[0, "methods"] == ("l1_unstructured",)  # code names in the values
    with pd.option_context("display.width", 1000, "display.max_columns", None):
        printed_text = repr(report)
    for printed in (printed_text, report._repr_html_()):
        assert "55.8%" in printed
        assert "0.5577" not in printed
        assert "10,000" in printed  # numel with a separator
        assert "100×100" in printed
        assert "l1_unstructured" in printed  # the printed form keeps code names for code
    derived = report.set_index("name")[["sparsity"]]
    assert "55.8%" in repr(derived)
    assert derived.loc["0.weight", "sparsity"] == sparsity


def test_compare_and_history_frames_print_for_people_too():
    session = _pruned_session()
    frame = session.compare_global_local(["0.weight", "2.weight"], 0.5)
    assert list(frame.columns) == COMPARE_COLUMNS
    assert frame["collapsed_global"].dtype == bool
    assert "True" not in repr(frame)
    assert "False" not in repr(frame)
    assert "No" in repr(frame)
    session.apply("2.weight", "random_unstructured", amount=0.5, seed=1655000000)
    history = session.history("2.weight").to_frame()
    assert history.loc[0, "seed"] is None
    assert history.loc[1, "seed"] == 1655000000
    with pd.option_context("display.width", 1000, "display.max_columns", None):
        printed = repr(history)
    assert "1655000000" in printed
    assert "nan" not in printed
    assert "e+09" not in printed


def test_report_frame_round_trips_as_a_plain_dataframe():
    frame = ReportFrame({"name": ["a"], "sparsity": [0.25]})
    pd.testing.assert_frame_equal(pd.DataFrame(frame), pd.DataFrame({"name": ["a"],
                                                                      "sparsity": [0.25]}))
    assert "25.0%" in str(frame)


def test_summary_statistics_of_a_report_print_as_numbers():
    stats = _pruned_session().report().describe()
    assert type(stats) is pd.DataFrame
    assert stats.loc["count", "sparsity"] == 4

"""Helpers users reach from ``prune_explorer.session`` are the sub-packages' own objects."""

from __future__ import annotations

import prune_explorer.session as session
from prune_explorer.session.analysis import conformance
from prune_explorer.session.model import state_dict
from prune_explorer.session.shrink import description


def test_deep_helpers_are_reexported_where_users_look():
    assert session.pattern_report is conformance.pattern_report
    assert session.load_pruned_state_dict is state_dict.load_pruned_state_dict
    assert session.StateDictMismatchError is state_dict.StateDictMismatchError
    assert session.InvalidMaskError is state_dict.InvalidMaskError
    assert session.describe_shrunk is description.describe
    assert session.rebuild_shrunk is description.rebuild
    assert session.InvalidDescriptionError is description.InvalidDescriptionError
    assert set(session.__all__) >= {"pattern_report", "load_pruned_state_dict",
                                    "describe_shrunk", "rebuild_shrunk"}

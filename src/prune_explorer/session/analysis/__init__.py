"""Reading a model's pruning state: report DataFrames with fixed columns (:mod:`.frames`), the
words and numbers a person reads (:mod:`.wording`: the one place that formats them),
sensitivity sweeps (:mod:`.sensitivity`) and N:M pattern conformance (:mod:`.conformance`).
Nothing here changes the model; the session's report methods are
:mod:`prune_explorer.session.parts.reporting`.
"""

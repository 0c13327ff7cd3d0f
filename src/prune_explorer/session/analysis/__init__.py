"""Reading a model's pruning state: report DataFrames with fixed columns (:mod:`.frames`), the
words and numbers a person reads (:mod:`.wording`: the one place that formats them),
sensitivity sweeps (:mod:`.sensitivity`), N:M pattern conformance (:mod:`.conformance`), what a
criterion's score is made of and where two criteria disagree (:mod:`.why`) and the bins of the
importance histograms (:mod:`.bins`).
Nothing here changes the model; the session's report methods are
:mod:`prune_explorer.session.parts.reporting`.
"""

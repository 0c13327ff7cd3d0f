"""Code generation: the plain Python a plan exports for stock torch (:mod:`.snippet`), with the
lines for steps whose cut split a tie (:mod:`.tie_split` finds the split, :mod:`.tie_lines`
writes it), for the pattern methods stock torch lacks (:mod:`.pattern_lines`), for large custom
masks (:mod:`.mask_lines`), and the one escaper for untrusted text that reaches generated
source (:mod:`.pysource`). Names and values are data: nothing here evaluates them.
"""

"""The preview engine: what a step would leave, computed without changing anything, once per
tensor state and invalidated precisely -- for the slider, and for ``apply_global`` and the
reports too. The L1 order of a tensor's unpruned entries (:mod:`.l1_order`, stored compactly
by :mod:`.compact_keys`, cached by :mod:`.order_cache`), one score per slice for structured
steps (:mod:`.slice_scores`), small key histograms for the global cut (:mod:`.global_cut`), the
sorted importances behind the Magnitudes panel (:mod:`.magnitudes`), the masks built from them
(:mod:`.masks`) and everything one picture of a previewed step needs (:mod:`.picture`). The
session's preview methods are :mod:`prune_explorer.session.parts.previewing`. A preview equals
what applying installs, bit for bit.
"""

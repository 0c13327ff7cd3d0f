"""The slider's fast path: what a slider move reads, computed once per tensor state and
invalidated precisely. The L1 order of a tensor's unpruned entries (:mod:`.l1_order`, stored
compactly by :mod:`.compact_keys`, cached by :mod:`.order_cache`), one score per slice for
structured steps (:mod:`.slice_scores`), small key histograms for the global cut
(:mod:`.global_cut`), the sorted importances behind the Magnitudes panel (:mod:`.magnitudes`),
and the previews built from them (:mod:`.previews`; the session's preview methods in
:mod:`.previewing`). A preview equals what applying installs, bit for bit.
"""

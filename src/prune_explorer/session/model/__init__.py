"""The live model as the session sees it: which tensors can be pruned (:mod:`.targets`), the
pruning state ``prune`` leaves on a module (:mod:`.hooks`), noticing changes made behind the
session's back (:mod:`.watch`), loading a pruned ``state_dict`` (:mod:`.state_dict`), tied
parameters (:mod:`.aliases`), saving as the model's library saves (:mod:`.saving`) and trial
copies for measuring a previewed step (:mod:`.trial`).
"""

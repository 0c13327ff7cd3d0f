"""What the session did and the one way to take it back: per-tensor history of masks stored as
bits (:mod:`.tensor_history`, :mod:`.packed`), the journal that makes every public action a
transaction, exact on any exception (:mod:`.journal`), and what a commit changes and frees
(:mod:`.commits`).
"""

"""What the session did, tensor by tensor: the mask after every step, stored as bits
(:mod:`.tensor_history`). The journal that takes steps back is
:mod:`prune_explorer.session.transaction`; what a commit changes and frees is
:mod:`prune_explorer.session.parts.commits`.
"""

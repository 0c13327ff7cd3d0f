"""The values the session holds and reads, at the bottom of the session: masks packed as bits
(:mod:`.packed`: :class:`~prune_explorer.session.PackedMask`, its sharded form and the cache of
packed masks by buffer) and the rank helpers for tensors sharded over processes
(:mod:`.sharded`). Imports nothing else of the session.
"""

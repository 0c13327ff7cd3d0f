"""All or nothing: the journal of what the session did and the one way to take it back exactly
(:mod:`.journal`: the lock, the transaction and running one step inside it), and holding Ctrl-C
while the session's records change (:mod:`.interrupts`).
"""

"""What one pruning action is: :class:`~prune_explorer.session.Step`, the methods a step may name
and the rules for their settings (one table, read from the core's), a public call's arguments
turned into a step, the checks of a step against the model's current state, the seeds and tie
rules that make the session's calls reproduce stock torch, and running a step through the
``prune`` functions themselves. Nothing here keeps state between calls.
"""

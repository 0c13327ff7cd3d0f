"""Plans: :class:`~prune_explorer.session.Plan`, an ordered list of steps that saves to JSON,
loads back with strict validation (no pickle, no eval), exports to a stock-torch snippet and
replays on a model; and the reader that turns plan files into JSON documents, every failure an
:class:`~prune_explorer.session.InvalidPlanError` naming the step and field.
"""

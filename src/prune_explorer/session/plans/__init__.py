"""Plans: :class:`~prune_explorer.session.Plan`, an ordered list of steps that saves to JSON,
loads back with strict validation (no pickle, no eval), exports to a stock-torch snippet and
replays on a model (:mod:`.plan`); and the plan file format, both ways, in one module
(:mod:`.format`: the document, every step field, the versions and the amount forms; every reading
failure an :class:`~prune_explorer.session.InvalidPlanError` naming the step and field).
"""

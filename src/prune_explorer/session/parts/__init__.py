"""The parts of :class:`~prune_explorer.session.Session`: its public methods, grouped by job
(reports, previews, commits, a call's arguments), each part working on the session's shared
state. ``session.py`` names the part each public method lives in.
"""

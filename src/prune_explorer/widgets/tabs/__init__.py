"""The explorer's tabs: the Explore tab in :mod:`.explore` (a folder: controls, picture, panels),
then one module each for History, Global vs local (``compare.py``), Export (and import) and
Commit (with its Shrink action in ``shrink.py``). ``registry.py`` lists the tabs in their order
(title, the panes, what each needs): a new tab is one new module and one line there.
"""

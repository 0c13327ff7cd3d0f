"""The explorer's tabs: the Explore tab in :mod:`.explore` (a folder: controls, picture, panels),
then one module each for History, Global vs local (``compare.py``), Export (and import) and
Commit (with its Shrink action in ``shrink.py``). ``titles.py`` names the tabs in their order.
"""

"""The Explore tab: the pruning controls, the live picture and what sits around it.

``pane.py`` wires the tab (controls, picture, Apply/Undo/Reset and what the buttons say);
``controls.py`` holds the method/amount/n/dim controls and ``preview.py`` turns them into a
request and draws the session's answer. Under the picture: the model view (``modelview.py``) and
the magnitudes (``magnitude.py``), both in collapsible ``panels.py``, and the ``zoom.py`` panel.
``metric.py`` shows the user's ``evaluate`` readout, ``feedback.py`` why a button is off,
``maskfile.py`` a custom mask read from an upload (how much room the browser gives the picture:
``parts/sizeprobe.py``, which every sized picture shares).
"""

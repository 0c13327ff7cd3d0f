"""Building blocks every tab uses: the widget registry and header (``ui.py``), the status line and
progress bar (``status.py``), the latest-request-only runner for live previews
(``scheduler.py``), collapsible panels, the copy button, HTML escaping and tables, the
explorer's stylesheet, and the size probe that tells each picture its room (``sizeprobe.py``).
"""

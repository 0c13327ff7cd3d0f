"""JupyterLab's login, made mandatory off the loopback interface (``prune-explorer lab --ip``).

Jupyter only *warns* when it serves a non-local address with authentication switched off (an
empty token and no password, say from a ``jupyter_server_config.py``). ``prune-explorer lab
--ip ADDRESS`` therefore runs JupyterLab with :class:`AuthRequiredIdentityProvider`: Jupyter's own
password-or-token provider, which refuses to start when the server listens beyond the machine
and neither a token nor a password is set. The check runs inside JupyterLab, on the settings it
actually resolved (command line, config files, ``JUPYTER_TOKEN``), before it binds the port.

Only JupyterLab imports this module (by name, from the command line ``lab_command`` builds).
"""

from __future__ import annotations

import sys
from typing import Any

from jupyter_server.auth.identity import PasswordIdentityProvider

from .lab import is_loopback

__all__ = ["AuthRequiredIdentityProvider"]


class AuthRequiredIdentityProvider(PasswordIdentityProvider):
    """Token or password login, required whenever the server listens beyond loopback.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> import logging
    >>> app = SimpleNamespace(ip="127.0.0.1", log=logging.getLogger("demo"))
    >>> AuthRequiredIdentityProvider(token="").validate_security(app)  # loopback: allowed
    """

    def validate_security(self, app: Any, ssl_options: dict[str, Any] | None = None) -> None:
        """Jupyter's checks, then exit with status 1 if ``app.ip`` is not local and auth is off."""
        super().validate_security(app, ssl_options)
        if self.auth_enabled or is_loopback(app.ip or "0.0.0.0"):
            return
        self.log.critical(
            "prune-explorer lab --ip %s: refusing to serve a non-local address with "
            "authentication disabled (empty token and no password); anyone on the network could "
            "run code. Remove the empty token from your Jupyter config (IdentityProvider.token), "
            "set JUPYTER_TOKEN, or set a password (`jupyter server password`).",
            app.ip or "(all interfaces)",
        )
        sys.exit(1)

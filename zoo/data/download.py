"""Downloads that fail fast and say what to do instead.

Without a network, tensorflow-datasets retries for minutes before it gives
up; a connection attempt with a short timeout answers in seconds. Loaders
call `check_reachable` before a download that is not cached yet.
"""

import socket
import threading
import urllib.parse


class DataNotFoundError(RuntimeError):
    """No source of the dataset could be read; the message says what was
    tried and how to point the recipe at a local copy."""


def check_reachable(url, what, local_flag, timeout=10.0):
    """Raises `DataNotFoundError` within `timeout` seconds when `url`'s host
    cannot be reached (no network, no DNS, a firewall).

    Args:
        url: what would be downloaded.
        what: the data, in words ("IMDB", "the corpus").
        local_flag: the recipe flag that reads a local copy instead.
        timeout: seconds to wait for a connection.
    """
    parsed = urllib.parse.urlparse(url)
    host = parsed.hostname
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    outcome = {}

    def connect():
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome["ok"] = True
        except OSError as error:  # DNS failures included
            outcome["error"] = error

    # getaddrinfo ignores socket timeouts, so the attempt runs in a thread
    # that is abandoned after `timeout`.
    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout)
    if outcome.get("ok"):
        return
    reason = outcome.get("error") or f"no answer in {timeout:g} s"
    raise DataNotFoundError(
        f"cannot download {what}: {host} is unreachable ({reason}). "
        f"Pass {local_flag} to use a local copy."
    )

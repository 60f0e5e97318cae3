"""Which proxy an LLM request goes through, from the environment as curl, requests and httpx read it.

``HTTPS_PROXY`` / ``HTTP_PROXY`` (by the request's scheme), else ``ALL_PROXY``; lower-case names win over upper-case
ones, as in urllib (``urllib.request.getproxies_environment``); ``NO_PROXY`` lists hosts, domains (``.corp.example``
or ``corp.example``: the domain and its sub-domains), ``*`` (no proxy at all) and host:port pairs
(``urllib.request.proxy_bypass_environment``). A loopback host (``127.0.0.1``, ``localhost``, ``::1``) is always
reached directly: the harness-started llama.cpp server listens there, and a proxy's own loopback is another machine's.

The openai SDK's default HTTP client honours these variables, but one given a transport of its own does not (httpx
reads them only when it builds the transport itself), so the client's :class:`~gear_repro.llm.deadline.DeadlineTransport`
routes by :func:`route` instead, and connection errors name the route taken.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from gear_repro.utils.secrets import redact_url

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


@dataclass(frozen=True)
class Route:
    """How a request to a URL is sent: ``proxy`` (its URL; None = directly) and ``why`` (the variable it came from,
    or why none applies), for messages."""

    proxy: str | None
    why: str

    def describe(self) -> str:
        """``via proxy http://***@proxy:3128 (HTTPS_PROXY)`` or ``directly (...)``: credentials masked."""
        if self.proxy is None:
            return f"directly ({self.why})"
        return f"via proxy {redact_url(self.proxy)} ({self.why})"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface."""
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _env(name: str, environ: os._Environ | dict[str, str]) -> tuple[str, str] | None:
    """(value, the variable's name) of ``name`` in lower case, else upper case; None when both are unset or blank."""
    for var in (name.lower(), name.upper()):
        value = (environ.get(var) or "").strip()
        if value:
            return value, var
    return None


def route(url: str, environ: os._Environ | dict[str, str] | None = None) -> Route:
    """The :class:`Route` of a request to ``url`` under ``environ`` (default: ``os.environ``)."""
    environ = os.environ if environ is None else environ
    parts = urlsplit(url)
    host, scheme = parts.hostname or "", (parts.scheme or "http").lower()
    if is_loopback(host):
        return Route(None, "a loopback host is never proxied")
    found = _env(f"{scheme}_proxy", environ) or _env("all_proxy", environ)
    if found is None:
        return Route(None, f"no proxy set: {scheme.upper()}_PROXY and ALL_PROXY are unset; set one if this network "
                           "reaches the endpoint only through a proxy")
    proxy, var = found
    no_proxy = _env("no_proxy", environ)
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    if no_proxy is not None and urllib.request.proxy_bypass_environment(netloc, {"no": no_proxy[0]}):
        return Route(None, f"{no_proxy[1]} lists {host}")
    if "://" not in proxy:
        proxy = f"http://{proxy}"
    return Route(proxy, var)


def connect_address(url: str, environ: os._Environ | dict[str, str] | None = None) -> tuple[str, int, Route]:
    """(host, port, route): where a connection for ``url`` goes first: the proxy when one applies, else the URL's host
    (port from the URL, else 443 for https and 80 for http)."""
    r = route(url, environ)
    target = urlsplit(r.proxy or url)
    default = 443 if (target.scheme or "http").lower() == "https" else 1080 if "socks" in target.scheme else 80
    return target.hostname or "", target.port or default, r

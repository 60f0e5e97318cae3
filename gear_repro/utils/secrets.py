"""Secret redaction for every file a run writes and every log line.

Four kinds of secret are hidden: credentials inside a URL (``scheme://user:password@host``: the userinfo becomes
``***``), secret-looking query parameters of a URL (``?key=...``, ``&api-key=...``, ``&access_token=...``,
``&sig=...``, ``?code=...``: the value becomes ``***``; both by :func:`redact_url`), the values of HTTP headers (any config key
ending in ``headers``: ``llm.params.extra_headers``), the values of the same secret-named query parameters given as a map
(any config key ending in ``query``: ``llm.params.extra_query: {sig: ...}``, :func:`mask_query`) and the values given on the command line under a secret-looking key (``*.api_key``, ``*.password``, ...), which
:func:`register_secret` records so that :func:`redact_text` replaces them wherever they appear. Log records pass
through :class:`RedactingFilter` (installed on the root handlers by :func:`install_log_redaction`), so httpx's
request line and any message or traceback that quotes a URL are redacted before they reach the console or
``run.log``.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any

MASK = "***"
# userinfo up to the authority's *last* @ (as urllib and httpx split it: a password holding an @ is masked whole)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#\"'<>]+@")
# a query parameter whose name ends in key / token / secret / password / signature / sig / auth (any prefix:
# api_key, x-api-key, access_token, client_secret), or is `code` (Azure Functions' key); its value up to the next
# & ; # or space
_PARAM_NAME = r"(?:[\w.-]*(?:key|token|secret|password|passwd|signature|sig|auth)|code)"
_SECRET_PARAM = re.compile(rf"(?i)([?&;]{_PARAM_NAME}=)[^&;#\s\"'<>]+")
_SECRET_PARAM_NAME = re.compile(rf"(?i){_PARAM_NAME}")
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary text; a URL's userinfo is masked by pattern anyway
_known: set[str] = set()
_lock = threading.Lock()


# a secret's key: api_key, key, x-api-key, password, client_secret, access_token, authorization, credentials
_SECRET_KEY = re.compile(r"((^|[_-])(api[_-]?)?key|password|passwd|secret|token|authorization|credentials?)$",
                         re.IGNORECASE)


def is_secret_key(key: object) -> bool:
    """A config key whose value is a secret (api_key, key, password, secret, token, authorization, ...)."""
    return bool(_SECRET_KEY.search(str(key)))


def has_userinfo(text: str) -> bool:
    """Whether ``text`` holds a URL with credentials (``scheme://user[:password]@host``)."""
    return bool(_USERINFO.search(text))


def is_secret_param(name: object) -> bool:
    """A URL query parameter whose value is a secret, by the rule URLs are masked by (``sig``, ``code``, ``api-key``,
    ``access_token``, ``client_secret``, ...; ``country_code`` is not)."""
    return bool(_SECRET_PARAM_NAME.fullmatch(str(name)))


def is_query_key(key: object) -> bool:
    """A config key whose values are URL query parameters (``extra_query``, ``default_query``)."""
    return str(key).lower().endswith("query")


def mask_query(params: object) -> object:
    """A query-parameter map with the values of secret-named parameters (:func:`is_secret_param`) replaced by
    ``***`` (the other parameters kept: ``api-version`` says which API the run used)."""
    if not isinstance(params, dict):
        return params
    return {k: MASK if is_secret_param(k) and v not in (None, "") else v for k, v in params.items()}


def register_query_secrets(params: object) -> None:
    """Register the values of secret-named query parameters under any ``*query`` key of a request-param map
    (``llm.params.extra_query``), so :func:`redact_text` masks them in any log line or error that quotes them."""
    if not isinstance(params, Mapping):  # a dict, or Hydra's DictConfig as instantiate passes it
        return
    for key, value in params.items():
        if is_query_key(key) and isinstance(value, Mapping):
            for name, v in value.items():
                if is_secret_param(name) and v not in (None, ""):
                    register_secret(v)
        elif isinstance(value, Mapping):
            register_query_secrets(value)


def is_header_key(key: object) -> bool:
    """A config key whose values are HTTP headers (``extra_headers``, ``default_headers``, ``headers``)."""
    return str(key).lower().endswith("headers")


def mask_url_params(text: str) -> str:
    """``text`` with the values of secret-looking URL query parameters replaced by ``***`` (deterministic: no
    registered secrets involved, so usable inside cache keys)."""
    return _SECRET_PARAM.sub(rf"\1{MASK}", text)


def redact_url(text: str) -> str:
    """``text`` with the userinfo of every URL and the values of secret-looking query parameters replaced by ``***``
    (deterministic: no registered secrets involved)."""
    return mask_url_params(_USERINFO.sub(rf"\1{MASK}@", text))


def register_secret(value: object) -> None:
    """Remember ``value`` (a password, key or header value) so :func:`redact_text` masks it everywhere."""
    text = str(value).strip()
    if len(text) >= _MIN_SECRET_LEN:
        with _lock:
            _known.add(text)


def header_secret(value: str | None, name: str) -> str | None:
    """A key as an HTTP header carries it: surrounding whitespace stripped (a CRLF .env file's CR, which httpx and
    urllib3 quoted with the key into their errors), registered as a secret; a control or non-ASCII character inside
    it is a ConfigError naming ``name``, never the value. None for an unset or blank key."""
    from gear_repro.utils.errors import ConfigError

    key = (value or "").strip()
    if not key:
        return None
    register_secret(key)
    if not (key.isascii() and key.isprintable()):
        raise ConfigError(f"{name} holds a character an HTTP header cannot carry (a control character inside the key, "
                          "or a non-ASCII one): check how it was set")
    return key


def redact_text(text: str) -> str:
    """``text`` with URL userinfo, secret URL parameters and every registered secret replaced by ``***``."""
    text = redact_url(text)
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_strings(value: Any) -> Any:
    """``value`` with :func:`redact_text` applied to every string in it (dicts and lists walked): an LLM reply that
    echoes the key is stored and returned without it."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_strings(v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """Redacts a record's message (arguments merged in) and its traceback text in place; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = redact_text(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Add a :class:`RedactingFilter` to every handler of ``logger`` (default: the root logger), once."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


# -- command-line overrides (gear-repro, python -m gear_repro.extraction --set) ----------------------------------
def _is_secret_name(name: str) -> bool:
    parts = name.split(".")
    in_query = len(parts) >= 2 and is_query_key(parts[-2]) and is_secret_param(parts[-1])  # extra_query.sig
    return is_secret_key(parts[-1]) or any(is_header_key(part) for part in parts) or in_query


def _map(value: str) -> dict | None:
    """``value`` parsed as a ``{...}`` map (a whole-node override such as ``llm.params={extra_headers: ...}``)."""
    text = value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value
    if not text.lstrip().startswith("{"):
        return None
    import yaml

    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _secret_leaves(node: object, under_secret: bool = False, in_query: bool = False) -> list[object]:
    """The values of a parsed map that sit under a secret-looking or ``*headers`` key, or under a secret-named
    parameter of a ``*query`` map (at any depth; ``in_query``: ``node`` is such a map)."""
    if isinstance(node, dict):
        return [v for k, sub in node.items()
                for v in _secret_leaves(sub, under_secret or is_secret_key(k) or is_header_key(k)
                                        or (in_query and is_secret_param(k)), is_query_key(k))]
    if isinstance(node, list):
        return [v for sub in node for v in _secret_leaves(sub, under_secret)]
    return [node] if under_secret and node not in (None, "") else []


def is_secret_override(name: str, value: str) -> bool:
    """A value to keep off disk: under a secret-looking key or a ``*headers`` key, a map holding such a key at any
    depth (``llm.params={extra_headers: {Authorization: ...}}``), or a URL with credentials."""
    parsed = _map(value)
    in_query = is_query_key(name.rsplit(".", 1)[-1])
    return (_is_secret_name(name) or has_userinfo(value)
            or (parsed is not None and bool(_secret_leaves(parsed, in_query=in_query))))


def register_override(name: str, value: str) -> None:
    """Record an override's secret value(s) for :func:`redact_text`: each secret leaf of a ``{...}`` map, else the
    value."""
    parsed = _map(value)
    if parsed is not None:
        leaves = _secret_leaves(parsed, _is_secret_name(name), is_query_key(name.rsplit(".", 1)[-1]))
        for v in leaves:
            register_secret(v)
        if leaves:
            return
    register_secret(value)

"""LLM list prices (gear_repro/resources/prices.yaml): the report's cost table (reporting/cost.py) and the
estimate said before a large run (llm/estimate.py) read one table."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from gear_repro.utils.errors import GearError

PRICES_YAML = Path(__file__).resolve().parent.parent / "resources" / "prices.yaml"


def load_prices(path: str | Path | None = None, model: str | None = None) -> dict:
    """{model, input, output ($ per 1M tokens), date, source} of ``model`` (default: the file's default)."""
    p = Path(path) if path else PRICES_YAML
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise GearError(f"price table {p}: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), dict):
        raise GearError(f"price table {p}: expected a mapping with 'models' (and 'default', 'date'); see "
                        f"{PRICES_YAML.name}")
    name = model or doc.get("default")
    if name not in doc["models"]:
        raise GearError(f"price table {p} has no model '{name}' (has: {', '.join(doc['models'])})")
    m = doc["models"][name]
    try:
        out = {"model": name, "input": float(m["input"]), "output": float(m["output"]), "date": str(doc["date"]),
               "source": doc.get("source", ""), "currency": doc.get("currency", "USD")}
    except (KeyError, TypeError, ValueError) as e:
        raise GearError(f"price table {p}: model '{name}' needs numeric 'input' and 'output' and the table a "
                        f"'date' ({type(e).__name__}: {e})") from None
    bad = [k for k in ("input", "output") if not (math.isfinite(out[k]) and out[k] >= 0)]
    if bad:  # a negative or NaN price made the cost table's $ per 1k questions negative or nan
        raise GearError(f"price table {p}: model '{name}' has {' and '.join(f'{k}: {m[k]}' for k in bad)}; prices "
                        "are $ per 1M tokens, finite and >= 0")
    return out


def price_for_model(model: str, path: str | Path | None = None) -> dict | None:
    """The price table's row (:func:`load_prices`) for a served model name: the name itself, else the longest table
    name it extends by a dated or versioned suffix (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``); None when the table
    prices no such model (a local or self-hosted model: no list price)."""
    p = Path(path) if path else PRICES_YAML
    load_prices(p)  # the table's own checks, with its errors
    doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    names = sorted((n for n in doc["models"] if model == n or model.startswith(f"{n}-")), key=len, reverse=True)
    return load_prices(p, names[0]) if names else None


def usd(prompt_tokens: float, completion_tokens: float, prices: dict, per: float = 1) -> float:
    """Dollars for ``prompt_tokens`` input and ``completion_tokens`` output tokens at ``prices`` ($ per 1M tokens),
    times ``per`` (the cost table's $ per 1,000 questions: multiplied before the division, as that table always
    computed it, so its figures keep their last digit)."""
    return per * (prompt_tokens * prices["input"] + completion_tokens * prices["output"]) / 1e6

"""What a model costs, or that nobody knows.

A role's price (USD per million tokens, input and output) is the first of:
1. its own `price_input_per_mtok` / `price_output_per_mtok`, where either is above 0 (the
   other is then 0; both 0, the value the docs once showed as the default, counts as unset);
2. `[prices."<model>"]` in the configuration;
3. the shipped table of hosted models (`model_prices.toml` beside this module), by the model's
   name, then by its name with a date or `-latest` suffix taken off;
4. free (a known 0) when the server that answers is on this machine: the embedded model (a role
   with no `base_url`), or a `base_url` whose host is `localhost` or a loopback address
   (127.0.0.0/8, ::1). Behind the recording proxy the server that answers is the proxy's
   upstream. Another machine on your network is not taken as free: price it at 0 in
   `[prices]` if it is;
5. unknown: a cost that includes its calls is shown as unknown or as a lower bound, never as 0.

The table comes before locality because a hosted model's name on a local address is a proxy to
the paid API (LiteLLM, a gateway), not a model running here.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from data.costs.settings import ModelPrice

SHIPPED = Path(__file__).with_name("model_prices.toml")
_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@dataclass(frozen=True)
class Price:
    """A model's price in USD per million tokens, and where it came from (`role`, `[prices]`,
    `shipped <as_of>`, `local`)."""

    input_per_mtok: float
    output_per_mtok: float
    source: str

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok
        ) / 1e6


@cache
def shipped_prices(path: Path = SHIPPED) -> dict[str, Price]:
    """The shipped table: model name -> its price, the source naming the table's date."""
    table = tomllib.loads(path.read_text(encoding="utf-8"))["models"]
    return {
        model: Price(
            float(entry["input_per_mtok"]),
            float(entry["output_per_mtok"]),
            f"shipped, as of {entry['as_of']} ({entry['source']})",
        )
        for model, entry in table.items()
    }


def shipped_price(model: str) -> Price | None:
    """`model`'s price in the shipped table: by its name, else without a date suffix."""
    table = shipped_prices()
    return table.get(model) or table.get(_SUFFIX.sub("", model))


def is_local(server: str | None) -> bool:
    """Whether the model server at URL `server` runs on this machine (None: the embedded one)."""
    if server is None:
        return True
    host = urlsplit(server).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def price_of(
    model: str,
    server: str | None,
    own: tuple[float | None, float | None],
    configured: Mapping[str, ModelPrice],
) -> Price | None:
    """`model`'s price on `server` (None: the embedded server) for a role whose own prices are
    `own`, with `configured` the `[prices]` table; None when unknown (see the module)."""
    if any(own):
        return Price(own[0] or 0.0, own[1] or 0.0, "role")
    if model in configured:
        price = configured[model]
        return Price(price.input_per_mtok, price.output_per_mtok, "[prices]")
    shipped = shipped_price(model) if model else None
    if shipped is not None:
        return shipped
    if is_local(server):
        return Price(0.0, 0.0, "local")
    return None

"""JSON answers encoded with orjson: the fleet's 10,000-pod swimlane took the standard
library's encoder about ten times as long as orjson (docs/benchmarks.md, pages), on the one
thread a web process runs its views on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse

OPTIONS = orjson.OPT_NON_STR_KEYS
_django = DjangoJSONEncoder()


@dataclass(frozen=True)
class Encoded:
    """An answer already encoded (a shared one): sent as it is."""

    body: bytes


def encode(body: Any) -> bytes:
    """``body`` as JSON; types orjson does not know (Decimal, lazy text) as Django's
    encoder writes them."""
    return orjson.dumps(body, default=_django.default, option=OPTIONS)


def response(body: dict[str, Any] | Encoded, status: int = 200) -> HttpResponse:
    raw = body.body if isinstance(body, Encoded) else encode(body)
    return HttpResponse(raw, status=status, content_type="application/json")

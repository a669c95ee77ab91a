"""JSON answers encoded with orjson: the fleet's 10,000-pod swimlane took the standard
library's encoder about ten times as long as orjson (docs/benchmarks.md, pages), on the one
thread a web process runs its views on.

Every answer goes gzip-packed to a client that accepts gzip (every browser, curl
--compressed, requests), plain to any other, so every client reads the same JSON. A
shared answer is kept packed (``handoff.live.pages.stored.packed``); another is packed
here at the same level when it is larger than PACK_FROM: a board page of 100 pod views is
about 200 KB of JSON, tens of KB packed, for about a millisecond; a replay's fleet answer
(2 MB, not shared) for about 25 ms, as the live one's. Answers hold cluster data and no
secret (views are scrubbed, no CSRF token), so packing them tells an eavesdropper nothing
BREACH could use; HTML pages, which carry the CSRF token, are not packed."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from django.utils.cache import patch_vary_headers

from handoff.live.pages import stored

OPTIONS = orjson.OPT_NON_STR_KEYS
_django = DjangoJSONEncoder()
PACK_FROM = 1400  # bytes: below one TCP segment packing saves no round trip


@dataclass(frozen=True)
class Encoded:
    """An answer already encoded (a shared one): sent as it is, or ``gzipped``."""

    body: bytes
    gzipped: bool = False


def encode(body: Any) -> bytes:
    """``body`` as JSON; types orjson does not know (Decimal, lazy text) as Django's
    encoder writes them."""
    return orjson.dumps(body, default=_django.default, option=OPTIONS)


def response(
    body: dict[str, Any] | Encoded, status: int = 200, gzip_ok: bool = False
) -> HttpResponse:
    """``body`` as a JSON response: gzip-packed when ``gzip_ok`` (the client accepts gzip)
    and it is packed already or larger than PACK_FROM, else plain."""
    if isinstance(body, Encoded) and body.gzipped:
        packed = body.body
        if not gzip_ok:
            return _answer(gzip.decompress(packed), status, packed=False)
    else:
        raw = body.body if isinstance(body, Encoded) else encode(body)
        if not gzip_ok or len(raw) <= PACK_FROM:
            return _answer(raw, status, packed=False)
        packed = gzip.compress(raw, compresslevel=stored.PACK_LEVEL, mtime=0)
    return _answer(packed, status, packed=True)


def _answer(raw: bytes, status: int, packed: bool) -> HttpResponse:
    answer = HttpResponse(raw, status=status, content_type="application/json")
    if packed:
        answer.headers["Content-Encoding"] = "gzip"
    patch_vary_headers(answer, ("Accept-Encoding",))
    return answer


def accepts_gzip(header: str) -> bool:
    """Whether an ``Accept-Encoding`` value lets the answer be gzip (RFC 9110 12.5.3):
    gzip (or x-gzip) named with a weight above 0, else ``*`` with one. A weight that does
    not parse counts as 0: the plain answer is always correct."""
    named: float | None = None
    anything: float | None = None
    for part in header.split(","):
        coding, _, params = part.partition(";")
        coding = coding.strip().lower()
        if coding in ("gzip", "x-gzip"):
            named = max(named or 0.0, _weight(params))
        elif coding == "*":
            anything = _weight(params)
    chosen = named if named is not None else anything
    return bool(chosen)


def _weight(params: str) -> float:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                weight = float(value.strip())
            except ValueError:
                return 0.0
            return weight if 0.0 <= weight <= 1.0 else 0.0
    return 1.0

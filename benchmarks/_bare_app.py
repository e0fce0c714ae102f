"""The HTTP floor: a bare Starlette endpoint on the same uvicorn settings as ``agentrag serve``.

It reads and parses the request body and answers with a canned ``/search`` response (the bytes
of a real one, from ``BENCH_BARE_RESPONSE``): what any Python HTTP service pays on this machine
before it does any work (the loopback round trip, HTTP parsing, the ASGI call, the client).

    BENCH_BARE_RESPONSE=/tmp/r.json python -m uvicorn benchmarks._bare_app:app --port 8001
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_BODY = Path(os.environ["BENCH_BARE_RESPONSE"]).read_bytes()


async def search(request: Request) -> Response:
    json.loads(await request.body())
    return Response(_BODY, media_type="application/json")


app = Starlette(routes=[Route("/api/v1/query/{tenant_id}/search", search, methods=["POST"])])

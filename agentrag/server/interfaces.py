"""The service's other faces, added to the app by :func:`install` (one hook in :func:`create_app`).

* ``/`` and ``/playground/*``: the web playground (static HTML/CSS/JS shipped in the package).
* ``/docs``: Swagger UI from local assets (no CDN), the OpenAPI document declaring the Bearer scheme.
* ``/metrics``: Prometheus text format (:mod:`.metrics`).
* ``/v1/models``, ``/v1/chat/completions``: the OpenAI-compatible chat API (:mod:`.openai_chat`).
* ``/mcp``: the MCP server over streamable HTTP (:mod:`.mcp_server`; needs the ``mcp`` extra).
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

import agentrag as ar
from agentrag.server.gateway import Gateway

__all__ = ["PLAYGROUND", "install"]

PLAYGROUND = Path(__file__).resolve().parent / "playground"
# the playground's pages may talk to this origin only: nothing it loads or sends leaves the service
PLAYGROUND_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:"
)
BEARER = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "the service's JWT"}

_log = logging.getLogger("agentrag.server")


def install(app: Any, *, gateway: Gateway, config: Any, llm: Any, metrics_reader: Any = None) -> None:
    """Add the other faces to ``app``: each an adapter of its protocol over ``gateway`` (the one
    request path: :mod:`agentrag.server.gateway`)."""
    _docs(app)
    _playground(app, config)
    if metrics_reader is not None:
        pools = {"search": gateway.store.engine, "admission": gateway.admitter.engine}
        _metrics(app, metrics_reader, pools)
    from agentrag.server import openai_chat

    openai_chat.install(app, gateway=gateway, llm=llm)
    if importlib.util.find_spec("mcp") is None:
        _log.info("/mcp is off: the mcp extra is not installed (pip install 'agentrag[mcp]')")
        return
    from agentrag.server import mcp_server

    mcp_server.mount(app, gateway=gateway, llm=llm)


def _docs(app: Any) -> None:
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse, JSONResponse

    assets = _swagger_assets()
    if assets is not None:
        from fastapi.staticfiles import StaticFiles

        app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Any:
        if assets is None:
            message = (
                "Swagger UI's assets are not installed: pip install 'agentrag[server]' (fastapi-offline)"
            )
            return JSONResponse({"error": {"code": "DOCS_UNAVAILABLE", "message": message}}, 503)
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url,
            title="agentrag - API docs",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon.png",
            swagger_ui_parameters={"persistAuthorization": False},
        )
        return HTMLResponse(page.body, headers={"Content-Security-Policy": DOCS_CSP})

    original = app.openapi

    def openapi() -> dict[str, Any]:
        schema: dict[str, Any] = original()
        from agentrag.server.openai_chat import document_schema

        document_schema(schema)
        schema.setdefault("components", {}).setdefault("securitySchemes", {})["bearerAuth"] = BEARER
        for path, operations in schema.get("paths", {}).items():
            if path.startswith(("/api/", "/v1/")):
                for operation in operations.values():
                    operation["security"] = [{"bearerAuth": []}]
        return schema

    app.openapi = openapi


def _swagger_assets() -> str | None:
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "static"
    return str(folder) if (folder / "swagger-ui-bundle.js").is_file() else None


def _playground(app: Any, config: Any) -> None:
    from fastapi.responses import FileResponse, JSONResponse
    from fastapi.staticfiles import StaticFiles

    class Static(StaticFiles):
        async def get_response(self, path: str, scope: Any) -> Any:
            response = await super().get_response(path, scope)
            response.headers["Content-Security-Policy"] = PLAYGROUND_CSP
            response.headers["X-Content-Type-Options"] = "nosniff"
            return response

    app.mount("/playground", Static(directory=PLAYGROUND), name="playground")

    @app.get("/", include_in_schema=False)
    async def index() -> Any:
        headers = {"Content-Security-Policy": PLAYGROUND_CSP, "Cache-Control": "no-store"}
        return FileResponse(PLAYGROUND / "index.html", headers=headers)

    @app.get("/playground.json", include_in_schema=False)
    async def playground_config() -> Any:
        return JSONResponse({"tenant_claim": config.jwt_tenant_claim, "version": ar.__version__})


def _metrics(app: Any, reader: Any, pools: dict[str, Any]) -> None:
    from fastapi.responses import Response

    from agentrag.server.metrics import CONTENT_TYPE, Exposition

    exposition = Exposition(reader, pools)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Any:
        return Response(
            exposition.render(), media_type=CONTENT_TYPE.split(";")[0], headers={"Content-Type": CONTENT_TYPE}
        )

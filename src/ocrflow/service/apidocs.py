"""``/docs``: Swagger UI served from installed files, so the page works offline and under
the service's Content-Security-Policy (scripts from this origin only, none inline).

The Swagger UI bundle comes from the ``fastapi-offline`` wheel; the start-up script is ours
(``static/docs-init.js``).
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

SWAGGER = Path(fastapi_offline.__file__).resolve().parent / "static"
OURS = Path(__file__).resolve().parent / "static"
#: The only files ``/docs/assets/{name}`` serves: name -> (file, media type).
ASSETS = {
    "swagger-ui-bundle.js": (SWAGGER / "swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui.css": (SWAGGER / "swagger-ui.css", "text/css"),
    "init.js": (OURS / "docs-init.js", "text/javascript"),
}
PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>ocrflow API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" href="data:,">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/init.js"></script>
</body>
</html>
"""

router = APIRouter(include_in_schema=False)


@router.get("/docs")
def docs_page() -> HTMLResponse:
    """The Swagger UI page over ``/openapi.json``."""
    return HTMLResponse(PAGE)


@router.get("/docs/assets/{name}")
def docs_asset(name: str) -> FileResponse:
    """One of the page's own files (only the known names: nothing is joined unchecked)."""
    if name not in ASSETS:
        raise HTTPException(404, "not found")
    path, media_type = ASSETS[name]
    return FileResponse(path, media_type=media_type, headers={"Cache-Control": "max-age=3600"})

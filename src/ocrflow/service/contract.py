"""What the service's OpenAPI promises, and the handlers that keep the promise: one error
body (``{"detail": str}``) for every error, each operation's answers listed, the request
body of ``POST /v1/jobs`` as the service reads it, and an ``Allow`` header that names every
method of a path.

The schema is checked against the running service by schemathesis
(``tests/security/test_api_contract.py``, every check).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from .options import JobOptions

#: The bearer token every ``/v1`` operation asks for (declared in the OpenAPI; checked by
#: ``TokenSet``, which answers 401 itself: hence no automatic error here).
BEARER = HTTPBearer(auto_error=False, description="a token of OCRFLOW_API_TOKENS")

#: What each error status means, as the OpenAPI describes it.
ERROR_MEANINGS = {
    400: "Malformed body (multipart or JSON)",
    401: "No token, or an unknown one",
    403: "Without tokens: a Host that is not loopback, or a change from another origin",
    404: "No such job, document or page (or not the caller's)",
    413: "Upload too large, or too many documents",
    415: "Neither multipart/form-data nor application/json",
    422: "A bad or unknown option or parameter (the message names it)",
    429: "A quota: wait Retry-After seconds",
}


class ErrorBody(BaseModel):
    """Every error answer of the service: what went wrong, in one sentence."""

    detail: str


class JobCreated(BaseModel):
    """The answer of ``POST /v1/jobs``: the job's id and status."""

    id: str
    status: str


#: The operations on one job, by OpenAPI link name.
_JOB_OPERATIONS = (
    ("GetJob", "get_job"),
    ("CancelJob", "cancel_job"),
    ("DeleteJob", "delete_job"),
    ("JobResults", "job_results"),
    ("JobDocuments", "job_documents"),
)


def job_links() -> dict[str, Any]:
    """OpenAPI links from a created job to the operations on it (clients and fuzzers follow
    them to a real job id)."""
    return _links({"job_id": "$response.body#/id"})


def deleted_job_links() -> dict[str, Any]:
    """OpenAPI links from a deleted job to the operations on it, which now answer 404 (a
    fuzzer follows them to check that a deleted job stays deleted)."""
    return _links({"job_id": "$request.path.job_id"})


def _links(parameters: dict[str, str]) -> dict[str, Any]:
    return {
        name: {"operationId": operation, "parameters": parameters}
        for name, operation in _JOB_OPERATIONS
    }


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route for the error statuses it may answer."""
    return {code: {"model": ErrorBody, "description": ERROR_MEANINGS[code]} for code in codes}


def _error_response(code: int) -> dict[str, Any]:
    """One error status as it stands in a generated OpenAPI (after ``get_openapi``)."""
    schema = {"$ref": "#/components/schemas/ErrorBody"}
    return {
        "description": ERROR_MEANINGS[code],
        "content": {"application/json": {"schema": schema}},
    }


def job_request_body() -> dict[str, Any]:
    """``openapi_extra`` of ``POST /v1/jobs``: multipart (at least one file or a URI) or
    JSON (at least one URI), with ``options`` as ``JobOptions`` (no other property)."""
    options = {"$ref": "#/components/schemas/JobOptions"}
    uris = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
    files = {"type": "array", "items": {"type": "string", "format": "binary"}, "minItems": 1}
    callback = {"type": "string", "description": "an http(s) URL of an allowed host"}
    # A form field is text: ``uris`` is a JSON list written out (as ``curl -F`` sends it);
    # ``options`` an object, which a client sends as a JSON part (``encoding``).
    uri_list = {"type": "string", "description": "a JSON list of URIs (empty: none)"}
    multipart = {
        "type": "object",
        "properties": {
            "files": files,
            "options": options,
            "uris": uri_list,
            "callback_url": callback,
        },
        "additionalProperties": False,
        "anyOf": [{"required": ["files"]}, {"required": ["uris"]}],
    }
    as_json = {
        "type": "object",
        "properties": {"uris": uris, "options": options, "callback_url": callback},
        "required": ["uris"],
        "additionalProperties": False,
    }
    return {
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": multipart,
                    "encoding": {"options": {"contentType": "application/json"}},
                },
                "application/json": {"schema": as_json},
            },
        }
    }


def install(app: FastAPI, *, tokens: bool) -> None:
    """The error handlers and the OpenAPI of ``app``; ``tokens``: whether the service asks
    for one (without, the schema declares no security)."""
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.openapi = _openapi_of(app, tokens=tokens)  # type: ignore[method-assign]


async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    """A parameter FastAPI refused, as one sentence naming it (the first error)."""
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    where, *name = [str(part) for part in first.get("loc", ())] or ["request"]
    label = f"{where} parameter {'.'.join(name)!r}" if name else where
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return JSONResponse({"detail": f"invalid {label}: {message}"}, status_code=422)


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """FastAPI's answer; a 405 names every method of the path (Starlette's names those
    of the first route that matched the path only)."""
    response = await http_exception_handler(request, exc)
    if exc.status_code == 405:
        response.headers["Allow"] = ", ".join(sorted(_methods_of(request)))
    return response


def _methods_of(request: Request) -> set[str]:
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return methods


def _openapi_of(app: FastAPI, *, tokens: bool) -> Callable[[], dict[str, Any]]:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes
            )
            _add_job_options(schema.setdefault("components", {}).setdefault("schemas", {}))
            _fit_responses(schema, tokens=tokens)
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi


def _add_job_options(schemas: dict[str, Any]) -> None:
    """``JobOptions`` and the models it holds, as components (the request body refers to it)."""
    schema = JobOptions.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(schema.pop("$defs", {}))
    schemas["JobOptions"] = schema


def _fit_responses(schema: dict[str, Any], *, tokens: bool) -> None:
    """FastAPI lists a 422 of its own list-shaped body on every operation with parameters;
    this service answers ``ErrorBody`` and lists its 422s itself, where they can happen.
    Without tokens nothing is a 401 and the guards may answer 403."""
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            responses = operation.get("responses", {})
            content = responses.get("422", {}).get("content", {}).get("application/json", {})
            if content.get("schema", {}).get("$ref", "").endswith("/HTTPValidationError"):
                del responses["422"]
            if not tokens:  # no 401 then; the guards' 403 instead (``guards``)
                operation.pop("security", None)
                responses.pop("401", None)
                responses["403"] = _error_response(403)
    components = schema.get("components", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.get("schemas", {}).pop(name, None)
    if not tokens:
        components.pop("securitySchemes", None)

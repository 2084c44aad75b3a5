"""Errors in OpenAI's shape, {"error": {"message", "type", "param", "code"}}, which every OpenAI client
parses into its own exception (openai.AuthenticationError, BadRequestError, NotFoundError, ...)."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

# OpenAI's error "type" for each status the gateway answers with.
ERROR_TYPES = {
    400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
    405: "invalid_request_error", 413: "invalid_request_error", 415: "invalid_request_error",
    429: "rate_limit_exceeded", 500: "server_error", 503: "server_error", 504: "timeout",
}  # fmt: skip


class ApiError(Exception):
    """A request the gateway refuses or could not serve, answered as OpenAI's error object."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {
            "error": {
                "message": self.message, "type": ERROR_TYPES.get(self.status, "invalid_request_error"),
                "param": self.param, "code": self.code,
            }
        }  # fmt: skip
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value")

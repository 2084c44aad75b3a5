"""One keep-alive HTTP/1.1 connection, as plain as a client gets, so the client's own cost stays small beside
what a benchmark measures (the gateway's)."""

from __future__ import annotations

import asyncio


class HttpClient:
    """POSTs over one connection to 127.0.0.1:`port`, with `headers` on every request."""

    def __init__(self, port: int, headers: dict[str, str] | None = None) -> None:
        self.port = port
        self.extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        status, _, answer = await self.post_with_headers(path, body)
        return status, answer

    async def post_with_headers(self, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body)."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{self.extra}"
                f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        answer = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return int(status_line.split()[1]), headers, answer

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

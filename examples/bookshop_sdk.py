"""The bookshop as a user of the official Python SDK's ``MCPServer`` or of FastMCP writes it,
with their names: ``MCPServer``, ``Context`` and ``ctx.request_context.lifespan_context`` as
in the SDK's README; ``Depends``, ``CurrentContext`` and a ``Middleware`` class as FastMCP
names them (the SDK has no dependencies, and its middleware is a function). Only the imports
below the line say trio-mcp; ``trio_mcp.compat`` maps each name onto trio-mcp's Server
(spec/handlers.md TM-HAND-COMPAT-SERVER on). Served by ``python examples/bookshop_sdk.py`` or
``trio-mcp serve --app-dir examples bookshop_sdk:mcp``; tests/interop/test_interop_example.py
calls it with the SDK's client in both eras on both HTTP servers."""

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from typing import Any

from pydantic import BaseModel, Field

# -- the only lines that differ: `from mcp.server.mcpserver import Context, MCPServer`, and
# `from fastmcp.dependencies import CurrentContext, Depends` and
# `from fastmcp.server.middleware import Middleware, MiddlewareContext` --------------------------
from trio_mcp.compat import (
    Context,
    CurrentContext,
    Depends,
    MCPServer,
    Middleware,
    MiddlewareContext,
)

log = logging.getLogger("bookshop")


class Catalogue:
    """Stands for a database pool or an HTTP client: opened once, shared by every request."""

    def __init__(self) -> None:
        self.books = {"978-0": ("Structured Concurrency", 30.0), "978-1": ("Nurseries", 12.5)}
        self.open = False

    @classmethod
    async def connect(cls) -> "Catalogue":
        catalogue = cls()
        catalogue.open = True
        return catalogue

    async def disconnect(self) -> None:
        self.open = False

    def price(self, isbn: str) -> float:
        return self.books[isbn][1]


@dataclass
class AppContext:
    catalogue: Catalogue


@asynccontextmanager
async def app_lifespan(server: MCPServer) -> AsyncIterator[AppContext]:
    """Open the catalogue before the first request, close it after the last."""
    catalogue = await Catalogue.connect()
    try:
        yield AppContext(catalogue=catalogue)
    finally:
        await catalogue.disconnect()


mcp = MCPServer("Bookshop", lifespan=app_lifespan)


class Timing(Middleware):
    """Log how long each tool call takes."""

    async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
        started = time.perf_counter()
        try:
            return await call_next(context)
        finally:
            log.info("%s took %.1f ms", context.message.name,
                     (time.perf_counter() - started) * 1000)


mcp.add_middleware(Timing())


async def get_catalogue(ctx: Context = CurrentContext()) -> Catalogue:
    """A dependency: the lifespan's catalogue."""
    catalogue: Catalogue = ctx.request_context.lifespan_context.catalogue
    return catalogue


class OrderLine(BaseModel):
    isbn: str = Field(pattern=r"^978-\d+$", description="The book's ISBN")
    quantity: int = Field(ge=1, le=10)


class Order(BaseModel):
    """An order of books."""

    customer: str = Field(min_length=1)
    lines: list[OrderLine] = Field(min_length=1)


@dataclass
class Invoice:
    """What an order costs."""

    customer: str
    total: float
    issued: date


@mcp.tool()
async def invoice(order: Order, ctx: Context) -> Invoice:
    """Price an order."""
    await ctx.report_progress(0.5, 1.0, "pricing")
    books = ctx.request_context.lifespan_context.catalogue
    total = sum(books.price(line.isbn) * line.quantity for line in order.lines)
    return Invoice(customer=order.customer, total=total, issued=date(2026, 7, 28))


@mcp.tool()
def shelf_count(books: Catalogue = Depends(get_catalogue)) -> int:
    """How many titles are on the shelf (a plain def: it runs in a worker thread)."""
    return len(books.books)


@mcp.tool()
async def blurb(shelf: str, isbn: str, ctx: Context) -> str:
    """A book's blurb, read from the shelves resource."""
    [contents] = await ctx.read_resource(f"shelves://{shelf}/{isbn}")
    return f"Read {contents.content!s}, request {ctx.request_id}"


@mcp.resource("shelves://{+path}")
def book(path: str, ctx: Context) -> str:
    """One book's title, by its shelf and ISBN: ``shelves://fiction/978-1``."""
    shelf, _, isbn = path.rpartition("/")
    title = ctx.request_context.lifespan_context.catalogue.books[isbn][0]
    return f"{title} ({shelf})"


@mcp.prompt()
def review(title: str) -> str:
    """Ask for a review of a book."""
    return f"Please review the book {title!r} in three sentences."


if __name__ == "__main__":
    mcp.run(transport="streamable-http")

"""A server written the way the official Python SDK's ``MCPServer`` README and FastMCP's quick
start write one: a pydantic input model, a dataclass result, a plain ``def`` tool, a client
opened by the lifespan, a dependency, a middleware and a resource template. Only the imports
name trio-mcp. ``trio-mcp serve --app-dir examples bookshop:server`` serves it in both eras;
tests/interop/test_interop_example.py calls it with the SDK's client."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field

from trio_mcp import CallNext, Context, Depends, Server

log = logging.getLogger("bookshop")


class Catalogue:
    """Stands for an HTTP client or a database pool: opened once, shared by every request."""

    def __init__(self) -> None:
        self.books = {"978-0": ("Structured Concurrency", 30.0), "978-1": ("Nurseries", 12.5)}
        self.closed = False

    def price(self, isbn: str) -> float:
        return self.books[isbn][1]


@contextlib.asynccontextmanager
async def lifespan(server: Server) -> AsyncIterator[Catalogue]:
    catalogue = Catalogue()
    try:
        yield catalogue
    finally:
        catalogue.closed = True


def catalogue(ctx: Context) -> Catalogue:
    found: Catalogue = ctx.lifespan
    return found


async def timing(ctx: Context, call_next: CallNext) -> Mapping[str, Any]:
    started = time.monotonic()
    result = await call_next()
    log.info("%s took %.1f ms", ctx.method, (time.monotonic() - started) * 1000)
    return result


server = Server("bookshop", lifespan=lifespan, middleware=[timing])


class OrderLine(BaseModel):
    isbn: str = Field(pattern=r"^978-\d+$", description="The book's ISBN")
    quantity: int = Field(ge=1, le=10)


class Order(BaseModel):
    """An order of books."""

    customer: str = Field(min_length=1)
    lines: list[OrderLine] = Field(min_length=1)


@dataclasses.dataclass
class Invoice:
    """What an order costs."""

    customer: str
    total: float
    issued: datetime.date


@server.tool()
async def invoice(order: Order, books: Annotated[Catalogue, Depends(catalogue)]) -> Invoice:
    """Price an order."""
    total = sum(books.price(line.isbn) * line.quantity for line in order.lines)
    return Invoice(customer=order.customer, total=total, issued=datetime.date(2026, 7, 28))


@server.tool()
def shelf_count(books: Annotated[Catalogue, Depends(catalogue)]) -> int:
    """How many titles are on the shelf (a plain def: it runs in a worker thread)."""
    return len(books.books)


@server.resource("shelves://{+path}")
async def book(path: str, ctx: Context) -> str:
    """One book's title, by its shelf and ISBN: ``shelves://fiction/978-1``."""
    shelf, _, isbn = path.rpartition("/")
    return f"{ctx.lifespan.books[isbn][0]} ({shelf})"

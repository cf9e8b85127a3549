# Models as tool parameters and results, end to end in both eras (issue 40,
# spec/handlers.md): a pydantic model, a dataclass and the scalars arrive at the tool as
# Python values, come back as JSON meeting the outputSchema, and an argument that does not
# fit is refused naming its field (through trio_mcp.Client(server), in process); hostile
# arguments are refused in a line and the server keeps serving (over loopback: the wire).

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import uuid
from typing import Annotated, Any

import annotated_types
import jsonschema
import pydantic
import pytest
import trio
from feat_support import Connect
from support.client import request
from support.eras import ERAS, tool_call
from support.fixtures import StartServer
from support.modern import modern_headers, modern_request, post

from trio_mcp import Server

TIMEOUT = 20


class Item(pydantic.BaseModel):
    sku: str = pydantic.Field(pattern=r"^[A-Z]{3}-\d+$")
    quantity: int = pydantic.Field(ge=1, le=100)
    price: decimal.Decimal


class Order(pydantic.BaseModel):
    """An order to place."""

    customer: uuid.UUID
    items: list[Item] = pydantic.Field(min_length=1)
    deliver_on: datetime.date


@dataclasses.dataclass
class Receipt:
    """What an order cost."""

    order_id: uuid.UUID
    total: decimal.Decimal
    placed_at: datetime.datetime
    lines: int


def models_server() -> Server:
    server = Server("models")
    seen: list[Any] = []

    @server.tool()
    async def place(order: Order, note: Annotated[str, annotated_types.MaxLen(20)] = "") -> Receipt:
        """Place an order."""
        seen.append((order, note))
        assert isinstance(order, Order) and isinstance(order.customer, uuid.UUID)
        assert isinstance(order.items[0].price, decimal.Decimal)
        total = sum((i.price * i.quantity for i in order.items), decimal.Decimal(0))
        return Receipt(
            order_id=uuid.UUID(int=7), total=total, lines=len(order.items),
            placed_at=datetime.datetime(2026, 7, 28, 12, tzinfo=datetime.UTC),
        )

    @server.tool()
    async def echo_bytes(blob: bytes, when: datetime.datetime) -> Order:
        """Answer an order built from the arguments."""
        assert isinstance(blob, bytes) and isinstance(when, datetime.datetime)
        return Order(
            customer=uuid.UUID(int=len(blob)), deliver_on=when.date(),
            items=[Item(sku="ABC-1", quantity=1, price=decimal.Decimal("1.50"))],
        )

    server.seen = seen  # type: ignore[attr-defined]
    return server


ORDER = {
    "customer": str(uuid.UUID(int=1)),
    "items": [{"sku": "ABC-1", "quantity": 2, "price": "9.99"},
              {"sku": "XYZ-22", "quantity": 1, "price": 0.5}],
    "deliver_on": "2026-08-01",
}


@pytest.mark.spec("TM-HAND-PYDANTIC", "TM-HAND-TYPES", "TM-HAND-CONSTRAINTS")
@pytest.mark.parametrize("era", ERAS)
async def test_a_pydantic_order_in_and_a_dataclass_receipt_out(
    connect: Connect, era: str
) -> None:
    """The tool gets an Order instance (UUID, Decimal, date converted), and answers a
    dataclass whose structuredContent meets the advertised outputSchema; tools/list shows
    pydantic's own schema and the constraints."""
    server = models_server()
    client = await connect(server, era)
    with trio.fail_after(TIMEOUT):
        listed = await client.list_tools()
        result = await client.call_tool("place", {"order": ORDER, "note": "ring twice"})

    tools = {t["name"]: t for t in listed}
    place = tools["place"]
    assert Order.model_json_schema(ref_template="#/$defs/{model}")["properties"] == (
        place["inputSchema"]["$defs"]["Order"]["properties"]
    )
    assert {"type": "string", "maxLength": 20, "default": ""} == (
        place["inputSchema"]["properties"]["note"]
    )
    assert not result.get("isError"), result
    structured = result["structuredContent"]
    assert {
        "order_id": str(uuid.UUID(int=7)), "total": "20.48",
        "placed_at": "2026-07-28T12:00:00+00:00", "lines": 2,
    } == structured
    jsonschema.Draft202012Validator(place["outputSchema"]).validate(structured)
    assert structured == json.loads(result["content"][0]["text"])
    order, note = server.seen[-1]  # type: ignore[attr-defined]
    assert datetime.date(2026, 8, 1) == order.deliver_on and "ring twice" == note


@pytest.mark.spec("TM-HAND-PATH", "TM-HAND-CONSTRAINTS")
@pytest.mark.parametrize("era", ERAS)
async def test_an_order_that_does_not_fit_is_a_tool_error_naming_the_field(
    connect: Connect, era: str
) -> None:
    """A bad quantity deep in the order, a bad SKU, and a date that is no date are refused
    before the tool runs, each naming where it is."""
    server = models_server()
    client = await connect(server, era)
    bad_quantity = {**ORDER, "items": [{**ORDER["items"][0], "quantity": 0}]}  # type: ignore[dict-item]
    bad_date = {**ORDER, "deliver_on": "soon"}
    with trio.fail_after(TIMEOUT):
        quantity = await client.call_tool("place", {"order": bad_quantity})
        date = await client.call_tool("place", {"order": bad_date})
        blob = await client.call_tool("echo_bytes", {"blob": "??", "when": "2026-01-01"})

    assert quantity["isError"] is True
    assert "order.items[0].quantity" in quantity["content"][0]["text"]
    assert date["isError"] is True and "deliver_on" in date["content"][0]["text"]
    assert blob["isError"] is True and "'blob': not base64" in blob["content"][0]["text"]
    assert [] == server.seen  # type: ignore[attr-defined]


@pytest.mark.spec("TM-HAND-PYDANTIC", "TM-HAND-TYPES")
@pytest.mark.parametrize("era", ERAS)
async def test_a_pydantic_result_is_its_json_dump(connect: Connect, era: str) -> None:
    """bytes arrive decoded and a datetime parsed; a model result is model_dump(mode="json")
    and meets pydantic's serialization schema."""
    client = await connect(models_server(), era)
    with trio.fail_after(TIMEOUT):
        result = await client.call_tool(
            "echo_bytes", {"blob": "aGVsbG8=", "when": "2026-07-28T10:00:00Z"}
        )
    assert {
        "customer": str(uuid.UUID(int=5)),
        "items": [{"sku": "ABC-1", "quantity": 1, "price": "1.50"}],
        "deliver_on": "2026-07-28",
    } == result["structuredContent"]


@pytest.mark.spec("TM-HAND-HOSTILE")
async def test_hostile_arguments_to_a_model_are_refused_and_the_server_keeps_serving(
    live_server: StartServer,
) -> None:
    """Nesting deeper than the parser takes, a 4 MB string where a SKU goes, and an integer
    of 5,000 digits are each refused with a JSON-RPC error or a tool error, never a 500;
    a good order is served after them."""
    live = await live_server(models_server())
    huge = {**ORDER, "items": [{**ORDER["items"][0], "sku": "A" * (4 << 20)}]}  # type: ignore[dict-item]
    template = modern_request("tools/call", {"name": "place", "arguments": {"order": 0}})
    headers = modern_headers(template)
    text = json.dumps(template)
    with trio.fail_after(60):
        # Deep nesting, and an integer Python refuses to convert, written by hand: the json
        # module would not write them.
        statuses = []
        for order in ("[" * 5000 + "]" * 5000, '{"customer": ' + "9" * 5000 + "}"):
            raw = text.replace('"order": 0', f'"order": {order}').encode()
            response = await request(live.url, "POST", headers, raw)
            statuses.append(response.status)
            assert response.status in (200, 400), (response.status, response.body[:200])
            assert b'"code":-32' in response.body.replace(b" ", b""), response.body[:300]
        big = await post(live.url, modern_request(
            "tools/call", {"name": "place", "arguments": {"order": huge}}
        ))
        statuses.append(big.status)
        assert 413 == big.status, big.body[:200]
        # Under the body limit, a 3 MB SKU is a tool error naming the field, in a line.
        long = await tool_call(live.url, ERAS[1], "place", {"order": {
            **ORDER, "items": [{**ORDER["items"][0], "sku": "A" * (3 << 20)}]}})  # type: ignore[dict-item]
        assert long["isError"] is True and "order.items[0].sku" in long["content"][0]["text"]
        assert len(long["content"][0]["text"]) < 2000
        good = await tool_call(live.url, ERAS[1], "place", {"order": ORDER})
    assert not good.get("isError"), good
    assert 500 not in statuses, statuses

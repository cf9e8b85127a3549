# Fair shares (spec/security.md, TM-SEC-FAIR and TM-SEC-UNIT): who a client is, for the
# server's pools (its unit), and the one admission rule every pool follows, max-min fairness.
#
# The rule, for a pool of `capacity` slots held by units: while the pool has room, anyone gets
# a slot. When it is full, a unit asking for `amount` more gets them only by taking them from
# the unit holding the most, and only if that unit holds more than the asker will once served;
# otherwise the asker is refused. Room is never taken from a unit at or below its max-min fair
# share, and a unit at or below its share is never refused (test_fair_share_model.py proves
# both over Hypothesis schedules of up to 64 units). Pure: no I/O, no time.
from __future__ import annotations

import enum
import heapq
import ipaddress
from collections.abc import Iterable
from typing import Final

import attrs

from ._headers import Headers
from ._transport import HttpRequest

__all__ = [
    "FairShare",
    "Unit",
    "UnitPolicy",
    "Verdict",
    "fair_share_level",
    "forwarded_for",
]

#: The unit of a request whose address is not known (a server driven in memory, a test).
UNKNOWN_ADDRESS: Final = "ip:unknown"


@attrs.frozen
class Unit:
    """Who holds a share of the server's pools (TM-SEC-UNIT): one principal, when the request
    is authenticated, else one network of client addresses (an IPv4 address, an IPv6 /64).

    ``key`` is the whole identity, a short string safe to keep anywhere (a Redis key, a log
    line): ``principal:<issuer>#<subject>`` or ``ip:<address>`` or ``ip:<network>/<prefix>``.
    """

    key: str

    @classmethod
    def of_principal(cls, principal_key: str) -> Unit:
        return cls("principal:" + principal_key)

    def __str__(self) -> str:
        return self.key


def _network(address: str, ipv4_prefix: int, ipv6_prefix: int) -> str | None:
    """The key part of ``address`` under the prefixes: the address itself at a full prefix,
    else its network; None when it is not an IP address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # one client, whichever socket family it came in on
    prefix = ipv4_prefix if ip.version == 4 else ipv6_prefix
    if prefix >= ip.max_prefixlen:
        return str(ip)
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


def _strip_port(value: str) -> str:
    """An address as a forwarding header may write it: ``[v6]:port``, ``v4:port``, bare."""
    value = value.strip().strip('"')
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def forwarded_for(headers: Headers, header: str) -> list[str]:
    """The client addresses a forwarding header lists, nearest the client first:
    ``x-forwarded-for`` (a comma-separated list) or ``forwarded`` (RFC 7239, the ``for=``
    parameter of each element). Entries are returned as written, ports and brackets taken
    off; one that is not an address (``unknown``, an obfuscated name) is kept as it is."""
    value = headers.get(header)
    if not value:
        return []
    if header != "forwarded":
        return [_strip_port(part) for part in value.split(",") if part.strip()]
    found = []
    for element in value.split(","):
        for pair in element.split(";"):
            name, _, param = pair.partition("=")
            if name.strip().lower() == "for":
                found.append(_strip_port(param))
    return found


@attrs.frozen(kw_only=True)
class UnitPolicy:
    """How a request's unit is found (TM-SEC-UNIT): its principal; else its client's address
    under ``ipv4_prefix`` / ``ipv6_prefix``, taken from ``header`` only for a connection from
    one of ``trusted_proxies`` (walking the list from the right, past each trusted proxy)."""

    ipv4_prefix: int = 32
    ipv6_prefix: int = 64
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    header: str = "x-forwarded-for"
    #: Addresses seen, with their unit: parsing an address costs microseconds, a lookup
    #: nanoseconds. Bounded: emptied when full.
    _seen: dict[str, Unit] = attrs.field(factory=dict, eq=False, repr=False)

    @classmethod
    def of(
        cls,
        *,
        ipv4_prefix: int = 32,
        ipv6_prefix: int = 64,
        trusted_proxies: Iterable[str] = (),
        header: str = "x-forwarded-for",
    ) -> UnitPolicy:
        if not 0 <= ipv4_prefix <= 32 or not 0 <= ipv6_prefix <= 128:
            raise ValueError("prefix lengths are 0-32 (IPv4) and 0-128 (IPv6)")
        header = header.lower()
        if header not in ("x-forwarded-for", "forwarded", "x-real-ip"):
            raise ValueError("the client address header is x-forwarded-for, forwarded or x-real-ip")
        return cls(
            ipv4_prefix=ipv4_prefix,
            ipv6_prefix=ipv6_prefix,
            trusted_proxies=tuple(ipaddress.ip_network(p, strict=False) for p in trusted_proxies),
            header=header,
        )

    def trusted(self, address: str | None) -> bool:
        """Whether ``address`` is one of the configured proxies."""
        if address is None or not self.trusted_proxies:
            return False
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in net for net in self.trusted_proxies)

    def client_address(self, peer: str | None, headers: Headers) -> str | None:
        """The client's address: ``peer``, unless ``peer`` is a trusted proxy, when it is the
        rightmost address of the header that is not a trusted proxy (the one the nearest
        trusted proxy saw); the last trusted one when the next is not an address."""
        if not self.trusted(peer):
            return peer
        current = peer
        for entry in reversed(forwarded_for(headers, self.header)):
            if _network(entry, 128, 128) is None:
                break  # not an address: the proxy that wrote it is as far as we know
            current = entry
            if not self.trusted(entry):
                break
        return current

    def client_address_of(self, request: HttpRequest) -> str | None:
        """``client_address`` of ``request``'s connection peer and headers."""
        return self.client_address(request.peer_host, request.headers)

    def of_address(self, address: str | None) -> Unit:
        """The unit of a client at ``address`` (None: unknown)."""
        if address is None:
            return Unit(UNKNOWN_ADDRESS)
        unit = self._seen.get(address)
        if unit is None:
            network = _network(address, self.ipv4_prefix, self.ipv6_prefix)
            unit = Unit(UNKNOWN_ADDRESS if network is None else "ip:" + network)
            if len(self._seen) >= 4096:
                self._seen.clear()
            self._seen[address] = unit
        return unit

    def of_request(self, principal_key: str | None, peer: str | None, headers: Headers) -> Unit:
        """A request's unit: its principal's, else its client address's."""
        if principal_key:
            return Unit.of_principal(principal_key)
        return self.of_address(self.client_address(peer, headers))


class Verdict(enum.Enum):
    """What a pool does with a request for more (``FairShare.verdict``)."""

    ADMIT = "admit"
    """There is room."""
    EVICT = "evict"
    """The pool is full, and the unit holding the most holds more than the asker will once
    served: take from it (``FairShare.victim``), then ask again."""
    REFUSE = "refuse"
    """The pool is full and the asker is over its fair share: 503 with Retry-After."""


class FairShare:
    """How much of one pool each unit holds, against the pool's capacity, and the max-min
    decision for a unit asking for more (TM-SEC-FAIR). Units are their keys (``Unit.key``).

    Complexity, n the units holding something: ``add`` and ``remove`` O(1), but O(log n) when
    a unit reaches a new high (a push on a max-heap); ``victim`` and ``verdict`` O(log n)
    amortized (stale heap entries are popped once each; the heap is rebuilt, in O(n), when it
    holds more than twice the units' entries).
    """

    __slots__ = ("_heap", "_held", "_mark", "capacity", "total")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a pool holds at least one")
        self.capacity = capacity
        self.total = 0
        self._held: dict[str, int] = {}
        #: Max-heap of (-holding, unit) entries; each unit holding something has an entry at
        #: least as high as its holding (a holding that fell leaves its entry stale, above).
        self._heap: list[tuple[int, str]] = []
        #: The highest entry each unit has in the heap.
        self._mark: dict[str, int] = {}

    def __len__(self) -> int:
        """How many units hold something."""
        return len(self._held)

    def held(self, unit: str) -> int:
        return self._held.get(unit, 0)

    def holdings(self) -> dict[str, int]:
        return dict(self._held)

    def fits(self, amount: int = 1) -> bool:
        return self.total + amount <= self.capacity

    def add(self, unit: str, amount: int = 1) -> None:
        held = self._held.get(unit, 0) + amount
        self._held[unit] = held
        self.total += amount
        if held > self._mark.get(unit, 0):
            self._mark[unit] = held
            heapq.heappush(self._heap, (-held, unit))
            if len(self._heap) > 2 * len(self._held) + 64:
                self._rebuild()

    def remove(self, unit: str, amount: int = 1) -> None:
        held = self._held.get(unit, 0) - amount
        if held < 0:
            raise ValueError(f"{unit} holds less than {amount}")
        self.total -= amount
        if held:
            self._held[unit] = held
        else:
            del self._held[unit]

    def _rebuild(self) -> None:
        self._heap = [(-held, unit) for unit, held in self._held.items()]
        heapq.heapify(self._heap)
        self._mark = dict(self._held)

    def top(self) -> tuple[str, int] | None:
        """The unit holding the most, and how much; None when the pool is empty."""
        heap = self._heap
        while heap:
            negative, unit = heap[0]
            held = self._held.get(unit, 0)
            if held == -negative:
                return unit, held
            # Stale: the unit holds less now (or nothing). Its current holding goes back in.
            heapq.heappop(heap)
            if held:
                heapq.heappush(heap, (-held, unit))
                self._mark[unit] = held
            else:
                self._mark.pop(unit, None)
        return None

    def victim(self, unit: str, amount: int = 1) -> str | None:
        """The unit to take from so that ``unit`` may have ``amount`` more: the unit holding
        the most, when it holds more than ``unit`` will once served; else None, which means
        ``unit`` is over its fair share (or nothing can be taken from anyone else)."""
        top = self.top()
        if top is None:
            return None
        other, held = top
        if other == unit or held <= self._held.get(unit, 0) + amount:
            return None
        return other

    def can_take(self, unit: str, amount: int = 1) -> bool:
        """Whether room for ``amount`` more of ``unit`` can be taken from the units that hold
        more than ``unit`` will once served, without taking any of them below that level:
        what they hold above it covers what the pool lacks. O(m log n), m the units looked
        at (one for a pool of slots, where ``amount`` is 1)."""
        lacking = self.total + amount - self.capacity
        if lacking <= 0:
            return True
        level = self._held.get(unit, 0) + amount
        heap = self._heap
        looked: list[tuple[int, str]] = []
        counted: set[str] = set()
        above = 0
        try:
            while above < lacking:
                top = self.top()
                if top is None or top[1] <= level:
                    return False
                if top[0] not in counted and top[0] != unit:
                    # A unit may have several entries (a stale one is pushed again at its
                    # holding): each unit counts once.
                    counted.add(top[0])
                    above += top[1] - level
                looked.append(heapq.heappop(heap))
            return True
        finally:
            for entry in looked:
                heapq.heappush(heap, entry)

    def verdict(self, unit: str, amount: int = 1) -> Verdict:
        """What to do with ``unit`` asking for ``amount`` more."""
        if self.total + amount <= self.capacity:
            return Verdict.ADMIT
        return Verdict.EVICT if self.can_take(unit, amount) else Verdict.REFUSE


def fair_share_level(holdings: Iterable[int], capacity: int) -> float:
    """The max-min fair share of a pool of ``capacity`` among demands ``holdings``: the level
    s at which every unit's demand, capped at s, adds up to the capacity (infinite when the
    demands fit whole). What the property tests judge FairShare by; O(n log n)."""
    demands = sorted(holdings)
    left = float(capacity)
    for i, demand in enumerate(demands):
        share = left / (len(demands) - i)
        if demand > share:
            return share
        left -= demand
    return float("inf")

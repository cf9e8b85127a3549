# What the kernel knows about a connection's reader (TM-BP-STALL).
#
# A writer blocked on a full socket learns of its reader's progress only when the kernel
# wakes it, which is in bursts. The kernel itself knows more: in TCP_INFO, `tcpi_bytes_acked`
# grows as the peer acknowledges data, and once the peer's receive buffer is full it grows
# only as the peer's application reads. This module finds the socket of one connection in
# this process (an ASGI application never sees it, only its two addresses) and reads TCP_INFO
# from a duplicate of it.
#
# Linux only. Elsewhere, or when the socket cannot be found, there is no probe, and the stall
# detector judges by completed writes alone.
from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import stat
import struct
import sys
import time
from typing import Any, Protocol

import attrs

__all__ = ["SocketIndex", "TcpProbe", "TcpSample", "find_tcp_socket"]


class _GetSockOpt(Protocol):
    """A socket as a probe uses it: a stdlib socket, or trio's."""

    def getsockopt(self, level: int, option: int, buflen: int) -> bytes: ...

    def setsockopt(self, level: int, option: int, value: bytes) -> None: ...

    def getsockname(self) -> Any: ...

    def getpeername(self) -> Any: ...

    def close(self) -> None: ...

#: getsockopt(IPPROTO_TCP, TCP_INFO); Python names it on Linux.
_TCP_INFO = getattr(socket, "TCP_INFO", 11)
_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)
#: Fields of Linux's struct tcp_info (include/uapi/linux/tcp.h) read here, at their offsets,
#: checked on loopback (kernel 6.18): tcpi_unacked (segments in flight), tcpi_last_data_sent
#: (ms), tcpi_rtt (us), tcpi_bytes_acked (Linux >= 4.1) and tcpi_notsent_bytes (>= 4.6).
_UNACKED = struct.Struct("=I"), 24
_LAST_DATA_SENT = struct.Struct("=I"), 44
_RTT = struct.Struct("=I"), 68
_BYTES_ACKED = struct.Struct("=Q"), 120
_NOTSENT = struct.Struct("=I"), 144
#: What window pacing reads besides (TM-BP-PACE): tcpi_bytes_sent and tcpi_bytes_retrans
#: (Linux >= 4.19), and tcpi_snd_wnd, the window the peer last advertised (>= 5.4).
_BYTES_SENT = struct.Struct("=Q"), 200
_BYTES_RETRANS = struct.Struct("=Q"), 208
_SND_WND = struct.Struct("=I"), 228
#: tcpi_snd_wscale, the low four bits of byte 6: the scale of the windows the peer sends.
_WSCALE = struct.Struct("=B"), 6
#: How much of struct tcp_info is needed: up to tcpi_notsent_bytes for the stall detector; a
#: kernel that returns less is too old for it. Up to tcpi_snd_wnd for pacing, which a kernel
#: that returns less than _INFO_LEN simply goes without.
_INFO_MIN = 148
_INFO_LEN = 232
#: getsockopt(SOL_SOCKET, SO_MEMINFO) (Linux >= 3.15; Python does not name it): the socket's
#: memory accounts as u32s, of which SK_MEMINFO_SNDBUF (3) and SK_MEMINFO_WMEM_QUEUED (5).
_SO_MEMINFO = 55
_MEMINFO = struct.Struct("=6I")
#: TCP_NOTSENT_LOWAT's value when it is not set: the kernel then never waits on it.
_LOWAT_UNSET = 2**32 - 1
#: SO_LINGER on, with a timeout of 0: the socket's last close resets the connection (RST),
#: dropping what its send queue holds (TM-BP-CLOSE).
_LINGER_RESET = struct.pack("ii", 1, 0)

#: A socket address as the ASGI scope gives it: (host, port).
Address = tuple[str, int]


@attrs.frozen
class TcpSample:
    """What the kernel said about one TCP socket at one moment."""

    bytes_acked: int
    """Bytes of ours the peer has acknowledged since the connection opened."""
    notsent_bytes: int
    """Bytes in the socket's send queue not sent yet."""
    unacked: int
    """Segments sent and not acknowledged yet."""
    last_data_sent: float
    """Seconds since the socket last sent data."""
    rtt: float
    """The smoothed round-trip time, in seconds."""
    snd_wnd: int | None = None
    """The receive window the peer last advertised, in bytes (None: kernel too old)."""
    in_flight: int | None = None
    """Bytes sent and not acknowledged yet (None: kernel too old)."""
    window_grain: int = 1
    """The granularity of the peer's window, in bytes (2 to the power of its scale)."""


def _field(info: bytes, field: tuple[struct.Struct, int]) -> int:
    fmt, offset = field
    return int(fmt.unpack_from(info, offset)[0])


def _key(address: object) -> Address | None:
    """(host, port) in one spelling: an IPv4-mapped IPv6 address is the IPv4 one, and the
    flow info and scope id of an IPv6 socket address are left out; None for what is no IP
    socket address."""
    if not isinstance(address, tuple | list) or len(address) < 2:
        return None
    host, port = address[0], address[1]
    if not isinstance(host, str) or not isinstance(port, int):
        return None
    try:
        ip = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), port


def _names(sock: socket.socket) -> tuple[Address, Address] | None:
    """(local, peer) of a connected IP socket; None otherwise."""
    try:
        local = _key(sock.getsockname())
        peer = _key(sock.getpeername())
    except OSError:
        return None
    if local is None or peer is None:
        return None
    return local, peer


def _system_lowat() -> int:
    """The system's TCP_NOTSENT_LOWAT (net.ipv4.tcp_notsent_lowat), unset if unreadable."""
    try:
        with open("/proc/sys/net/ipv4/tcp_notsent_lowat") as f:
            return int(f.read().strip() or _LOWAT_UNSET)
    except (OSError, ValueError):
        return _LOWAT_UNSET


class TcpProbe:
    """An owned duplicate of one connection's TCP socket, read for TCP_INFO.

    Owning the duplicate means the descriptor it reads is never reused for another
    connection. While it is open it also keeps the socket itself open, whoever else closes
    it: ``close()`` it as soon as the connection is given up.
    """

    def __init__(
        self, sock: _GetSockOpt, local: Address, peer: Address, *, owned: bool = True
    ) -> None:
        self._sock: _GetSockOpt | None = sock
        self._owned = owned
        self.local = local
        self.peer = peer
        #: The socket's TCP_NOTSENT_LOWAT, read at the first ``room()`` (trio sets 16 KiB).
        self._lowat: int | None = None

    @classmethod
    def of_socket(cls, sock: _GetSockOpt) -> TcpProbe | None:
        """A probe of a connection's own socket, which the server owns and closes itself:
        no lookup, no duplicate (TM-HTTP-OWN). None off Linux or for a socket that is not
        TCP."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            local, peer = _key(sock.getsockname()), _key(sock.getpeername())
        except OSError:
            return None
        if local is None or peer is None:
            return None
        return cls(sock, local, peer, owned=False)

    @property
    def closed(self) -> bool:
        return self._sock is None

    def sample(self) -> TcpSample | None:
        """The kernel's figures for the socket now; None once closed, or when they cannot
        be read (the probe then closes)."""
        sock = self._sock
        if sock is None:
            return None
        try:
            info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _INFO_LEN)
        except OSError:
            info = b""
        if len(info) < _INFO_MIN:
            self.close()
            return None
        paced = len(info) >= _INFO_LEN
        return TcpSample(
            bytes_acked=_field(info, _BYTES_ACKED),
            notsent_bytes=_field(info, _NOTSENT),
            unacked=_field(info, _UNACKED),
            last_data_sent=_field(info, _LAST_DATA_SENT) / 1000,
            rtt=_field(info, _RTT) / 1_000_000,
            snd_wnd=_field(info, _SND_WND) if paced else None,
            in_flight=max(
                0,
                _field(info, _BYTES_SENT)
                - _field(info, _BYTES_RETRANS)
                - _field(info, _BYTES_ACKED),
            )
            if paced
            else None,
            window_grain=1 << (_field(info, _WSCALE) & 0x0F),
        )

    def room(self) -> int:
        """Bytes a send to the socket takes now without waiting, by the kernel's accounts
        (0 when they cannot be read). Linux waits for room when the send queue's memory
        reaches the send buffer, or its unsent bytes the socket's TCP_NOTSENT_LOWAT; a send
        within both limits is copied whole."""
        sock = self._sock
        if sock is None:
            return 0
        try:
            if self._lowat is None:
                raw = sock.getsockopt(socket.IPPROTO_TCP, _NOTSENT_LOWAT, 4)
                # 0: not set on the socket, which then has the system's default.
                lowat = int.from_bytes(raw, sys.byteorder) if len(raw) == 4 else 0
                self._lowat = lowat or _system_lowat()
            meminfo = sock.getsockopt(socket.SOL_SOCKET, _SO_MEMINFO, _MEMINFO.size)
            if len(meminfo) < _MEMINFO.size:
                return 0
            fields = _MEMINFO.unpack_from(meminfo)
            # The send buffer counts the memory the queued data takes, which is more than
            # its bytes: half of what is free is what surely fits.
            room = (int(fields[3]) - int(fields[5])) // 2
            if self._lowat != _LOWAT_UNSET:
                info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _INFO_MIN)
                if len(info) < _INFO_MIN:
                    return 0
                room = min(room, self._lowat - _field(info, _NOTSENT))
        except OSError:
            return 0
        return max(0, room)

    def reset_on_close(self) -> bool:
        """Make the connection's close a reset (TM-BP-CLOSE): when its socket is closed (the
        last descriptor of it, the server's or this duplicate), the kernel drops what it
        still holds unsent or unacknowledged and sends RST, instead of delivering it, at the
        reader's pace, before a FIN. False when the option could not be set."""
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        except OSError:
            return False
        return True

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None and self._owned:
            sock.close()


class SocketIndex:
    """This process's connected TCP sockets, by (local, peer) address.

    A scan of ``/proc/self/fd`` maps TCP socket descriptors to their addresses. It looks
    only at descriptors that are new since the last scan, by descriptor and inode (a
    descriptor closed and reused holds a new socket, with a new inode), so a scan costs an
    ``fstat`` per descriptor and a look at each new socket: a connection opened a moment
    ago is found by its first lookup, however many connections came just before it. An
    address pair that was not found is not scanned for again within ``min_rescan``
    seconds, so the cost stays bounded for addresses no socket here has (behind a proxy, or
    a Unix socket). A hit is checked again on the duplicate it makes, since the descriptor
    may have been closed and reused since the scan.
    """

    def __init__(self, *, min_rescan: float = 1.0, fd_dir: str = "/proc/self/fd") -> None:
        self.min_rescan = min_rescan
        self.fd_dir = fd_dir
        self._by_names: dict[tuple[Address, Address], int] = {}
        #: Each socket descriptor seen by the last scan: its inode, and its addresses if it
        #: is a connected TCP socket.
        self._seen: dict[int, tuple[int, tuple[Address, Address] | None]] = {}
        #: Address pairs not found, and when.
        self._missed: dict[tuple[Address, Address], float] = {}
        self.scans = 0
        """Scans made so far."""
        self.examined = 0
        """Sockets looked at (duplicated and named) by the scans so far."""

    def find(self, local: object, peer: object) -> TcpProbe | None:
        """A probe of the socket connected from ``local`` to ``peer``, or None."""
        lk, pk = _key(local), _key(peer)
        if lk is None or pk is None:
            return None
        probe = self._open(lk, pk)
        if probe is not None:
            return probe
        now = time.monotonic()
        missed = self._missed.get((lk, pk))
        if missed is not None and now - missed < self.min_rescan:
            return None
        self._scan()
        probe = self._open(lk, pk)
        if probe is None:
            if len(self._missed) >= 1024:
                self._missed = {
                    k: t for k, t in self._missed.items() if now - t < self.min_rescan
                }
            self._missed[(lk, pk)] = now
        else:
            self._missed.pop((lk, pk), None)
        return probe

    def _open(self, local: Address, peer: Address) -> TcpProbe | None:
        fd = self._by_names.get((local, peer))
        if fd is None:
            return None
        sock = _tcp_socket_at(fd)
        if sock is None or _names(sock) != (local, peer):
            # Closed, or reused for another connection since the scan.
            if sock is not None:
                sock.close()
            del self._by_names[(local, peer)]
            self._seen.pop(fd, None)
            return None
        return TcpProbe(sock, local, peer)

    def _scan(self) -> None:
        self.scans += 1
        seen: dict[int, tuple[int, tuple[Address, Address] | None]] = {}
        try:
            entries = os.listdir(self.fd_dir)
        except OSError:
            entries = []
        for entry in entries:
            if not entry.isdigit():
                continue
            fd = int(entry)
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            if not stat.S_ISSOCK(st.st_mode):
                continue
            known = self._seen.get(fd)
            if known is not None and known[0] == st.st_ino:
                seen[fd] = known
                continue
            self.examined += 1
            names = None
            sock = _tcp_socket_at(fd)
            if sock is not None:
                with sock:
                    names = _names(sock)
                    if names is None and not _listening(sock):
                        continue  # not connected yet, perhaps: look again next time
            seen[fd] = (st.st_ino, names)
        self._seen = seen
        self._by_names = {names: fd for fd, (_, names) in seen.items() if names is not None}


def _listening(sock: socket.socket) -> bool:
    try:
        return bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
    except OSError:
        return False


def _tcp_socket_at(fd: int) -> socket.socket | None:
    """A duplicate of descriptor ``fd`` as a socket object, if it is an IP stream socket."""
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return None
        dup = os.dup(fd)
    except OSError:
        return None
    try:
        sock = socket.socket(fileno=dup)
    except OSError:
        with contextlib.suppress(OSError):
            os.close(dup)
        return None
    if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET, socket.AF_INET6):
        sock.close()
        return None
    return sock


_index: SocketIndex | None = None


def find_tcp_socket(local: object, peer: object) -> TcpProbe | None:
    """A probe of this process's TCP socket connected from ``local`` to ``peer`` (the
    ``server`` and ``client`` of an ASGI scope); None when not on Linux, when there is no
    such socket, or on any error."""
    global _index
    if not sys.platform.startswith("linux"):
        return None
    if _index is None:
        _index = SocketIndex()
    try:
        return _index.find(local, peer)
    except OSError:
        return None

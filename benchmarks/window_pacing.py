"""Can a sender tell a stopped reader from a slow one by the reader's TCP window? (TM-BP-STALL)

    python benchmarks/window_pacing.py --unread 4096 --rate 2048 --seconds 30 [--stop] [--clamp]

A raw loopback socket pair, no server. A reader thread reads 256 bytes at a time at ``--rate``
bytes/s (``--stop``: for the first second, then never again; ``--clamp``: its MSS is clamped to
1448 bytes, as a network path would). The sender writes 2 KB at a time, but only while its bytes
in flight plus how far the reader's advertised window (``tcpi_snd_wnd``) has shrunk below the
largest seen stay under ``--unread`` (0: no pacing, as fast as the socket takes). When it holds
back with nothing in flight, it sends a 2-byte SSE comment every 0.5 s so that the reader's
acknowledgement reports its window. It prints the longest wait between two openings of the
reader's window: what a stall detector judging by the window would have to allow a healthy
reader. Linux only (TCP_INFO with ``tcpi_snd_wnd``, kernel 5.4 or later).

The server's pacing (trio_mcp/runtime/backpressure/_pacer.py, TM-BP-PACE) grew out of this, with
three differences this experiment showed were needed: its probes are a byte or two of the
pending data and come 2 ms after a hold begins, then at doubling intervals (here, a reader at 1
MB/s behind 0.5 s probes got 16 KB/s, its reopened window unannounced until data came); a reader
that keeps up is let go; and a window that grows above the largest seen is not taken as reading
towards letting go.
"""

from __future__ import annotations

import argparse
import socket
import struct
import threading
import time

_BYTES_ACKED = struct.Struct("=Q"), 120
_SND_WND = struct.Struct("=I"), 228
_INFO_LEN = 232
CHUNK = b"x" * 2048
PROBE = b":\n"


def window(sock: socket.socket) -> tuple[int, int]:
    """(bytes acknowledged, the peer's advertised window) from TCP_INFO."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_LEN)
    acked = _BYTES_ACKED[0].unpack_from(info, _BYTES_ACKED[1])[0]
    wnd = _SND_WND[0].unpack_from(info, _SND_WND[1])[0]
    return int(acked), int(wnd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--unread", type=int, default=4096, help="bytes kept unread (0: none)")
    parser.add_argument("--rate", type=float, default=2048.0, help="reader, bytes/s")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--stop", action="store_true", help="the reader stops after 1 s")
    parser.add_argument("--clamp", action="store_true", help="reader's MSS 1448")
    args = parser.parse_args()

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.socket()
    if args.clamp:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1448)
    client.connect(listener.getsockname())
    sender, _ = listener.accept()
    sender.setblocking(False)
    read = [0]
    done = threading.Event()

    def reader() -> None:
        began = time.monotonic()
        while not done.is_set():
            if args.stop and time.monotonic() - began > 1.0:
                time.sleep(0.05)
                continue
            read[0] += len(client.recv(256))
            time.sleep(256 / args.rate)

    threading.Thread(target=reader, daemon=True).start()
    sent = largest = 0
    began = last_open = probed = time.monotonic()
    last_wnd: int | None = None
    gaps: list[float] = []
    while (now := time.monotonic()) - began < args.seconds:
        acked, wnd = window(sender)
        largest = max(largest, wnd)
        if last_wnd is not None and wnd > last_wnd:
            gaps.append(now - last_open)
            last_open = now
        last_wnd = wnd
        in_flight = sent - acked
        try:
            if args.unread <= 0 or in_flight + largest - wnd < args.unread:
                sent += sender.send(CHUNK)
            elif in_flight == 0 and now - probed > 0.5:
                sent += sender.send(PROBE)
                probed = now
        except BlockingIOError:
            pass
        time.sleep(0.002)
    done.set()
    waiting = time.monotonic() - last_open
    print(
        f"unread<={args.unread} rate={args.rate:.0f} stop={args.stop} clamp={args.clamp}: "
        f"read {read[0]} B ({read[0] / args.seconds:.0f} B/s), window reopened "
        f"{len(gaps)} times, longest wait {max(gaps[1:], default=0.0):.2f} s, "
        f"waiting {waiting:.2f} s at the end"
    )


if __name__ == "__main__":
    main()

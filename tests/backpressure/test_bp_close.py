# How a cut connection is closed (TM-BP-CLOSE), in memory under trio's MockClock: the whole
# runtime (session, view, writer, the kernel judge) serving a responder whose kernel is a
# model. The model's acknowledged bytes step as measured over loopback for issue 35's slow
# readers (benchmarks/BACKPRESSURE-NOTES.md): behind an 8 KiB receive buffer, 8.5 KB taken at
# once and then 6 KB steps; behind the smallest buffer (1 KiB asked, 2.3 KB given), 1.2 KB
# steps. Its pipe is read in bursts (1 KiB once a second) or as a trickle. The same readers
# over real sockets: test_bp_slow_shapes.py.
from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing
from support.slow import MemoryServer, PacedResponder, make_server, numbered

from trio_mcp import ServerConfig
from trio_mcp.runtime.backpressure._tcpprobe import TcpSample

#: How often a busy view looks at its writer (trio_mcp.runtime.backpressure._view._CHECK_EVERY).
CHECK = 0.25


@attrs.define
class KernelModel:
    """What TCP_INFO says of a reader at ``rate`` once its receive buffer is full: ``taken``
    acknowledged when first asked, then ``step`` more each time the reader has read that
    much; ``notsent`` bytes wait unsent on the server's side (0: everything sent has reached
    the reader's buffers)."""

    rate: float
    taken: int
    step: int
    notsent: int = 16384
    began: float = attrs.field(factory=trio.current_time)

    def sample(self) -> TcpSample:
        now = trio.current_time()
        steps = int(self.rate * (now - self.began) // self.step)
        return TcpSample(
            bytes_acked=self.taken + steps * self.step, notsent_bytes=self.notsent, unacked=0,
            last_data_sent=0.0, rtt=0.0001, in_flight=0,
        )


class KernelResponder(PacedResponder):
    """An in-memory responder whose socket is ``kernel`` (TcpProbing), and which records a
    request to make its close a reset (Resettable)."""

    def __init__(self, kernel: KernelModel, **pipe: float | int | None) -> None:
        super().__init__(**pipe)  # type: ignore[arg-type]
        self.kernel = kernel
        self.reset_asked_at: float | None = None
        self.closed_at: float | None = None

    def tcp_sample(self) -> TcpSample | None:
        return self.kernel.sample()

    def release_tcp_probe(self) -> None:
        pass

    def reset_on_close(self) -> bool:
        self.reset_asked_at = trio.current_time()
        return True


MODELS: dict[str, tuple[dict[str, float], dict[str, float | int | None]]] = {
    # 1 KiB once a second behind SO_RCVBUF 4 KiB (8 KiB effective).
    "bursts": (
        {"rate": 1024.0, "taken": 8518, "step": 6144},
        {"rate": 1024.0, "period": 1.0, "buffer": 8192},
    ),
    # 256 B every quarter of a second, the same buffer.
    "trickle": (
        {"rate": 1024.0, "taken": 8518, "step": 6144},
        {"rate": 1024.0, "period": 0.25, "buffer": 8192},
    ),
    # 1 KiB once a second behind the smallest buffer Linux gives.
    "tiny-buffer": (
        {"rate": 1024.0, "taken": 3059, "step": 1152},
        {"rate": 1024.0, "period": 1.0, "buffer": 2304},
    ),
}


async def _serve(
    kernel: KernelModel, pipe: dict[str, float | int | None], *, room_at_cut: bool = False
) -> tuple[KernelResponder, dict[str, float], float]:
    """A `stream` call of 200 notifications of 2 KB read through ``pipe``: its responder,
    when the cut was decided and the connection closed (from the call), and the budget.
    ``room_at_cut``: the pipe takes everything from the cut on (the reader's window opened)."""
    server, record = make_server()
    config = ServerConfig()
    seen: dict[str, float] = {}
    async with MemoryServer.open(server, config) as mem:
        sid = await mem.initialize()
        start = trio.current_time()
        kernel.began = start
        responder = KernelResponder(kernel, **pipe)
        mem.call(sid, "stream", {"n": 200, "size": 2000, "tag": "s"}, responder, progress=True)
        with trio.fail_after(120):
            while not responder.connection_closed.is_set():
                if "cut" not in seen and mem.stats()["streams_cut"]:
                    seen["cut"] = trio.current_time() - start
                    if room_at_cut:
                        responder.set_rate(None)
                await trio.sleep(0.01)
        seen["closed"] = trio.current_time() - start
        assert "s" not in record.cancelled
    return responder, seen, config.stall_budget


@pytest.mark.spec("TM-BP-CLOSE", "TM-BP-STALL")
@pytest.mark.parametrize("shape", sorted(MODELS))
async def test_a_cut_reader_whose_kernel_holds_its_data_is_reset_half_a_second_after(
    autojump_clock: trio.testing.MockClock, shape: str
) -> None:
    """A reader at 1 KiB/s of each shape is cut once its writer has been busy for the budget
    (the kernel's count: less delivered than a reader at the minimum would have read); its
    kernel still holds data unsent for it, so the signal cannot reach it: the responder is
    asked to reset the connection, which is closed within signal_timeout and a check of the
    cut, and nothing more goes into the pipe after the close."""
    kernel_args, pipe = MODELS[shape]
    kernel = KernelModel(**kernel_args)  # type: ignore[arg-type]
    responder, seen, budget = await _serve(kernel, pipe)
    assert budget <= seen["cut"] <= budget + CHECK, seen
    assert responder.reset_asked_at is not None
    assert seen["closed"] - seen["cut"] <= ServerConfig().signal_timeout + CHECK, seen
    assert [] == responder.named("resumption-required")
    numbers = [numbered(m) for m in responder.messages()]
    assert numbers == list(range(len(numbers)))


@pytest.mark.spec("TM-BP-CLOSE", "TM-BP-SIGNAL")
async def test_a_cut_reader_whose_kernel_has_delivered_everything_gets_the_signal_and_a_plain_close(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader the kernel judges too slow, whose buffers take the rest of the write and the
    signal at once (nothing left unsent: a paced reader's case), is closed plainly: no reset,
    the signal its last event, closed within a check of the cut."""
    kernel = KernelModel(rate=1024.0, taken=8518, step=6144, notsent=0)
    pipe: dict[str, float | int | None] = {"rate": 1024.0, "period": 1.0, "buffer": 8192}
    responder, seen, budget = await _serve(kernel, pipe, room_at_cut=True)
    assert budget <= seen["cut"] <= budget + CHECK, seen
    assert responder.reset_asked_at is None
    assert seen["closed"] - seen["cut"] <= CHECK, seen
    [signal] = responder.named("resumption-required")
    assert signal is responder.events[-1][1]

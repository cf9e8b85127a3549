# The two stall judges of trio_mcp/runtime/backpressure/_judge.py on their own, under trio's
# MockClock
# (pytest-trio's autojump_clock): no writer, no view, no sockets. The portable judge is fed the
# write completions of a modelled reader behind kernel buffers that wake a blocked write in
# bursts; the kernel judge is fed synthetic TcpSample sequences of a reader whose kernel
# acknowledges in steps, and, paced, the window of a modelled receiver. Each test asks the
# judge what a busy View asks its writer: `stalled_for` every CHECK seconds, cut at the budget.
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import attrs
import pytest
import trio
import trio.testing
from support.slow import PacedResponder

from trio_mcp.runtime.backpressure._judge import (
    RATE_LOOKBACK,
    SILENCE_FACTOR,
    KernelJudge,
    StallJudge,
    WriteProgressJudge,
    judge_for,
)
from trio_mcp.runtime.backpressure._pacer import WindowPacer, pace_limit
from trio_mcp.runtime.backpressure._tcpprobe import TcpSample

#: The defaults of ServerConfig: a 10 s stall budget at 2 KiB/s.
WINDOW = 10.0
MIN_RATE = 2048.0
LOOKBACK = RATE_LOOKBACK * WINDOW
#: How often a busy View asks (trio_mcp.runtime.backpressure._view._CHECK_EVERY).
CHECK = 0.25
#: One bucket of the judges' measure (a fortieth of the window).
BUCKET = WINDOW / 40
#: The writer's largest write at the defaults (View._max_write).
PIECE = 2560


# -- the models -------------------------------------------------------------------------------


def completions(
    rate: float, *, buffer: int, wake: float = 1 / 3, stop_at: float = math.inf
) -> Iterator[float]:
    """When each of a busy writer's writes of PIECE bytes completes, in seconds from the
    start, for a reader that drains ``rate`` bytes per second (until ``stop_at``, then
    nothing) through kernel buffers of ``buffer`` bytes: a write finds room at once while the
    buffers have it, and a blocked one returns only once ``wake`` of them is free (or its own
    size, if more). So progress reaches the writer in bursts."""
    t = held = 0.0
    while True:
        free = buffer - held
        if free < PIECE:
            need = max(PIECE, wake * buffer)
            if rate <= 0 or t + (need - free) / rate > stop_at:
                return
            t += (need - free) / rate
            held = buffer - need
        held += PIECE
        yield t


@attrs.define
class SteppingKernel:
    """A responder's TcpProbing as Linux answers it once the reader's receive buffer is full:
    ``taken`` bytes were acknowledged at once, then the count grows by ``step`` each time the
    reader, at ``rate``, has read ``step`` more (its window opens). Everything sent is
    acknowledged (``in_flight``, None: a kernel too old to say). ``silent_after``: from then
    on the probe answers nothing (the socket is gone)."""

    rate: float
    taken: int
    step: int
    in_flight: int | None = 0
    silent_after: float = math.inf
    began: float = 0.0
    releases: int = 0

    def sample(self) -> TcpSample | None:
        return self.tcp_sample()

    def tcp_sample(self) -> TcpSample | None:
        now = trio.current_time()
        if self.releases or now - self.began >= self.silent_after:
            return None
        steps = 0 if not self.rate else math.floor(self.rate * (now - self.began) / self.step)
        stepped_at = self.began + (steps * self.step / self.rate if steps else 0.0)
        return TcpSample(
            bytes_acked=self.taken + steps * self.step,
            notsent_bytes=16384,
            unacked=0,
            last_data_sent=now - stepped_at,
            rtt=0.0,
            in_flight=self.in_flight,
        )

    def release_tcp_probe(self) -> None:
        self.releases += 1


class Silent:
    """TcpProbing that never answers: an ASGI responder given no addresses (HTTP/2)."""

    def __init__(self) -> None:
        self.asked = 0

    def tcp_sample(self) -> TcpSample | None:
        self.asked += 1
        return None

    def release_tcp_probe(self) -> None:
        pass


@attrs.define
class Receiver:
    """A TCP receiver as TCP_INFO shows it to a pacing sender: what is written arrives and is
    acknowledged at once, each acknowledgement advertising the room its buffer has left; its
    application reads ``rate`` bytes per second of what arrived."""

    rate: float
    buffer: int = 128 * 1024
    acked: int = 0
    unread: float = 0.0
    wnd: int = 128 * 1024
    at: float = 0.0

    def deliver(self, n: int) -> None:
        now = trio.current_time()
        self.unread = max(0.0, self.unread - self.rate * (now - self.at))
        self.at = now
        self.unread += n
        self.acked += n
        self.wnd = self.buffer - math.ceil(self.unread)

    def sample(self) -> TcpSample:
        return TcpSample(
            bytes_acked=self.acked, notsent_bytes=0, unacked=0, last_data_sent=0.0,
            rtt=0.0001, snd_wnd=self.wnd, in_flight=0,
        )



class ProbedResponder(PacedResponder):
    """An in-memory responder that offers TcpProbing, answered by ``kernel``."""

    def __init__(self, kernel: SteppingKernel | Receiver) -> None:
        super().__init__(0.0)
        self.kernel = kernel

    def tcp_sample(self) -> TcpSample | None:
        return self.kernel.sample()

    def release_tcp_probe(self) -> None:
        pass


# -- the drivers ------------------------------------------------------------------------------


async def verdicts(
    judges: Iterable[StallJudge], done: Iterable[float], *, until: float
) -> list[list[float]]:
    """Run ``judges`` as a busy writer's: busy from now, a write beginning at once and again
    after each completion (``done``: seconds from now), and asked ``stalled_for`` every CHECK
    seconds up to ``until``; each one's answers."""
    judges = list(judges)
    start = trio.current_time()
    for judge in judges:
        judge.busy(start)
        judge.write_began(start)
    answers: list[list[float]] = [[] for _ in judges]
    pending = iter(done)
    upcoming = next(pending, None)
    k = 1
    while k * CHECK <= until:
        if upcoming is not None and upcoming <= k * CHECK:
            await trio.sleep_until(start + upcoming)
            now = trio.current_time()
            for judge in judges:
                judge.observe_write(now, PIECE)
                judge.write_began(now)
            upcoming = next(pending, None)
            continue
        await trio.sleep_until(start + k * CHECK)
        k += 1
        for judge, out in zip(judges, answers, strict=True):
            out.append(judge.stalled_for(trio.current_time(), MIN_RATE))
    return answers


async def cut_at(judge: StallJudge, done: Iterable[float] = (), *, until: float) -> float | None:
    """When a View would cut the reader (``stalled_for`` reaching the budget), in seconds
    from now; None if not by ``until``."""
    [answers] = await verdicts([judge], done, until=until)
    return next(((i + 1) * CHECK for i, a in enumerate(answers) if a >= WINDOW), None)


# -- the portable judge -------------------------------------------------------------------------


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("buffer", [5120, 20480, 65536, 262144])
async def test_portable_judge_cuts_a_reader_that_never_reads_once_its_buffers_are_owed(
    autojump_clock: trio.testing.MockClock, buffer: int
) -> None:
    """Cut at max(budget, buffered bytes / min rate), capped at RATE_LOOKBACK budgets."""
    done = list(completions(0.0, buffer=buffer))
    judge = WriteProgressJudge(WINDOW)
    took = await cut_at(judge, done, until=2 * LOOKBACK)

    bound = max(WINDOW, min(len(done) * PIECE / MIN_RATE, LOOKBACK))
    assert took is not None
    assert bound <= took <= bound + CHECK + BUCKET


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("buffer", [5120, 65536, 262144])
@pytest.mark.parametrize("stop_at", [15.0, 100.0])
async def test_portable_judge_cuts_a_reader_that_stops_within_the_lookback_of_its_last_write(
    autojump_clock: trio.testing.MockClock, buffer: int, stop_at: float
) -> None:
    """A reader that stops is cut no later than RATE_LOOKBACK budgets after its last write."""
    done = list(completions(2 * MIN_RATE, buffer=buffer, stop_at=stop_at))
    judge = WriteProgressJudge(WINDOW)
    took = await cut_at(judge, done, until=stop_at + 2 * LOOKBACK)

    assert took is not None
    assert stop_at <= took <= done[-1] + LOOKBACK + CHECK + BUCKET


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("factor", [1.01, 1.05, 1.25, 2.0, 4.0])
@pytest.mark.parametrize(("buffer", "wake"), [(5120, 1 / 3), (65536, 1 / 3), (65536, 0.5),
                                              (262144, 1 / 3), (196608, 0.5)])
async def test_portable_judge_never_cuts_a_reader_above_the_minimum_rate_however_bursty(
    autojump_clock: trio.testing.MockClock, factor: float, buffer: int, wake: float
) -> None:
    """No wait is longer than its burst takes at min rate, so this reader is never cut."""
    assert wake * buffer / (factor * MIN_RATE) < LOOKBACK
    done = completions(factor * MIN_RATE, buffer=buffer, wake=wake)
    judge = WriteProgressJudge(WINDOW)

    assert await cut_at(judge, done, until=600.0) is None


@pytest.mark.spec("TM-BP-STALL")
async def test_portable_judge_cuts_a_reader_whose_bursts_come_further_apart_than_the_lookback(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A wait longer than RATE_LOOKBACK budgets is a stall even above min rate (the cap)."""
    done = completions(1.05 * MIN_RATE, buffer=262144, wake=0.5)
    took = await cut_at(WriteProgressJudge(WINDOW), done, until=600.0)

    assert took is not None
    assert LOOKBACK <= took <= 2 * LOOKBACK


@pytest.mark.spec("TM-BP-STALL", "TM-BP-SIGNAL")
async def test_portable_judge_counts_only_busy_time_and_never_calls_a_reader_silent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Only busy time counts toward the budget; writes alone never call a reader silent."""
    judge = WriteProgressJudge(WINDOW)
    judge.busy(trio.current_time())
    await trio.sleep(0.6 * WINDOW)
    judge.idle(trio.current_time())
    await trio.sleep(30.0)
    judge.busy(trio.current_time())
    await trio.sleep(0.3 * WINDOW)

    assert 0.0 == judge.stalled_for(trio.current_time(), MIN_RATE)

    await trio.sleep(0.3 * WINDOW)
    now = trio.current_time()

    assert judge.busy_time(now) == pytest.approx(1.2 * WINDOW)
    assert judge.stalled_for(now, MIN_RATE) == pytest.approx(1.2 * WINDOW)
    assert not judge.reader_silent(now, MIN_RATE)
    assert not judge.paced and not judge.probing


# -- the kernel judge ---------------------------------------------------------------------------


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize(("taken", "bound"), [(4096, WINDOW), (65536, 32.0), (10**7, LOOKBACK)])
async def test_kernel_judge_cuts_a_stopped_reader_once_a_reader_at_the_minimum_would_step(
    autojump_clock: trio.testing.MockClock, taken: int, bound: float
) -> None:
    """Cut at max(budget, acknowledged bytes / min rate), capped at RATE_LOOKBACK budgets."""
    kernel = SteppingKernel(0.0, taken=taken, step=taken)
    judge = KernelJudge(kernel, window=WINDOW)
    took = await cut_at(judge, until=2 * LOOKBACK)

    assert judge.probing
    assert took is not None
    assert bound <= took <= bound + CHECK


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize("factor", [1.0, 1.25, 2.0, 4.0])
@pytest.mark.parametrize("step", [6144, 65536])
async def test_kernel_judge_never_cuts_a_reader_stepping_at_the_minimum_rate_or_faster(
    autojump_clock: trio.testing.MockClock, factor: float, step: int
) -> None:
    """A reader stepping at min rate or faster is never cut; one at half of it is."""
    healthy = KernelJudge(SteppingKernel(factor * MIN_RATE, taken=step, step=step), window=WINDOW)
    slow = KernelJudge(SteppingKernel(0.5 * MIN_RATE, taken=step, step=step), window=WINDOW)
    fine, cut = await verdicts([healthy, slow], (), until=600.0)

    assert healthy.probing
    assert all(a < WINDOW for a in fine)
    assert any(a >= WINDOW for a in cut)


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize(("in_flight", "bound"), [(0, WINDOW), (None, 8.5 + 8704 / MIN_RATE)])
async def test_kernel_judge_cuts_a_slow_reader_of_a_fresh_connection_at_the_budget(
    autojump_clock: trio.testing.MockClock, in_flight: int | None, bound: float
) -> None:
    """Sent less in all than min rate x busy time: cut at the budget, silence or not."""
    kernel = SteppingKernel(0.5 * MIN_RATE, taken=8704, step=8704, in_flight=in_flight)
    took = await cut_at(KernelJudge(kernel, window=WINDOW), until=LOOKBACK)

    assert took is not None
    assert bound <= took <= bound + CHECK


@pytest.mark.spec("TM-BP-SIGNAL")
async def test_kernel_judge_gives_up_on_a_silent_reader_but_waits_for_a_slow_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Silent past SILENCE_FACTOR allowances: given up; a reader at min rate / 3: waited for."""
    stopped = KernelJudge(SteppingKernel(0.0, taken=4096, step=4096), window=WINDOW)
    slow = KernelJudge(SteppingKernel(MIN_RATE / 3, taken=6144, step=6144), window=WINDOW)
    cut_stopped, cut_slow = await verdicts([stopped, slow], (), until=3 * WINDOW)
    assert any(a >= WINDOW for a in cut_stopped)
    assert any(a >= WINDOW for a in cut_slow)

    allowance = 4096 / MIN_RATE
    assert stopped.reader_silent(trio.current_time(), MIN_RATE)
    assert trio.current_time() > SILENCE_FACTOR * allowance
    for _ in range(int(LOOKBACK / CHECK)):
        assert not slow.reader_silent(trio.current_time(), MIN_RATE)
        await trio.sleep(CHECK)


@pytest.mark.spec("TM-BP-STALL")
@pytest.mark.parametrize(
    ("rate", "buffer", "stop_at"),
    [(0.0, 65536, math.inf), (2.0 * MIN_RATE, 65536, 20.0), (1.25 * MIN_RATE, 262144, math.inf),
     (0.5 * MIN_RATE, 20480, math.inf)],
)
async def test_kernel_judge_without_an_answer_judges_as_the_portable_one(
    autojump_clock: trio.testing.MockClock, rate: float, buffer: int, stop_at: float
) -> None:
    """With no answer from the kernel, the kernel judge says what the portable judge says."""
    silent = Silent()
    kernel = KernelJudge(silent, window=WINDOW)
    portable = WriteProgressJudge(WINDOW)
    done = completions(rate, buffer=buffer, stop_at=stop_at)
    by_kernel, by_writes = await verdicts([kernel, portable], done, until=2 * LOOKBACK)

    assert by_writes == by_kernel
    assert silent.asked > 0
    assert not kernel.probing
    assert not kernel.reader_silent(trio.current_time(), MIN_RATE)


@pytest.mark.spec("TM-BP-STALL", "TM-BP-RELEASE")
async def test_kernel_judge_whose_probe_goes_quiet_releases_it_and_judges_by_writes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A probe that stops answering is released once; the writes judge from then on."""
    kernel = SteppingKernel(MIN_RATE, taken=65536, step=65536, silent_after=30.0)
    judge = KernelJudge(kernel, window=WINDOW)
    took = await cut_at(judge, until=2 * LOOKBACK)

    assert 1 == kernel.releases
    assert not judge.probing
    assert took is not None
    assert 30.0 <= took <= 30.0 + CHECK
    judge.release()
    assert 1 == kernel.releases


@pytest.mark.spec("TM-BP-PACE")
@pytest.mark.parametrize(("factor", "cut"), [(0.0, True), (1.25, False), (2.0, False)])
async def test_paced_kernel_judge_cuts_a_reader_whose_window_shows_no_progress_for_a_budget(
    autojump_clock: trio.testing.MockClock, factor: float, cut: bool
) -> None:
    """Paced: no window progress for a budget is a cut; a reader above min rate is not cut."""
    receiver = Receiver(factor * MIN_RATE)
    pacer = WindowPacer(
        receiver.sample,
        limit=pace_limit(MIN_RATE, WINDOW),
        min_rate=MIN_RATE,
        ramp_rate=4 * MIN_RATE,
        probe_max=WINDOW / 40,
        small_window=int(MIN_RATE * WINDOW),
    )
    judge = judge_for(ProbedResponder(receiver), window=WINDOW, pacer=lambda _: pacer)
    assert isinstance(judge, KernelJudge) and judge.pacer is pacer
    start = trio.current_time()
    judge.busy(start)
    took: float | None = None

    async def write() -> None:
        written = 0
        while True:
            size, probe = await judge.admit(PIECE, written)
            judge.write_began(trio.current_time())
            receiver.deliver(size)
            written += size
            judge.observe_write(trio.current_time(), size, probe=probe)
            await trio.sleep(0.001)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        while trio.current_time() - start < 120.0:
            await trio.sleep(CHECK)
            if judge.stalled_for(trio.current_time(), MIN_RATE) >= WINDOW:
                took = trio.current_time() - start
                break
        paced = judge.paced
        nursery.cancel_scope.cancel()

    if cut:
        assert took is not None
        assert WINDOW <= took <= WINDOW + CHECK
    else:
        assert took is None
        assert paced


@pytest.mark.spec("TM-BP-STALL")
def test_judge_for_chooses_the_kernel_judge_only_for_a_responder_offering_tcp_probing() -> None:
    """TcpProbing responders get the kernel judge (paced if asked), any other the portable one."""
    probed = ProbedResponder(SteppingKernel(0.0, taken=0, step=1))
    unpaced = judge_for(probed, window=WINDOW)
    plain = judge_for(PacedResponder(0.0), window=WINDOW, pacer=lambda _: None)

    assert isinstance(unpaced, KernelJudge) and unpaced.pacer is None
    assert type(plain) is WriteProgressJudge

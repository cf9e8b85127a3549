# The command line: `trio-mcp serve [module:server]`, `trio-mcp tree URL`, `trio-mcp demo-tour`.
# trio and the server are imported after the allocator is chosen: choosing it may start the
# interpreter again, and everything imported before is imported twice (TM-SESS-ALLOCATOR).
from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import importlib.util
import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from ..base._allocator import ALLOCATORS, DEFAULT_ALLOCATOR, running_allocator, use_allocator
from ..base._collector import YOUNG_THRESHOLD, use_collector_threshold
from ._calls import COMMANDS as CLIENT_COMMANDS
from ._calls import add_client_commands, run_client_command

if TYPE_CHECKING:
    from ..app._server import Server
    from ..base._config import AuthConfig

__all__ = ["load_server", "main"]


def load_server(spec: str, *, app_dir: str | None = None) -> Server:
    """Import ``package.module:attribute`` and return the Server it names.

    ``app_dir`` (the command line's ``--app-dir``, by default the working directory) goes
    first on the import path, as uvicorn and hypercorn put it there: ``trio-mcp serve
    hello:server`` next to hello.py finds it. What cannot be imported stops the command with
    one line saying what and where (SystemExit); ``--log-level debug`` logs the traceback.
    """
    from ..app._server import Server

    module_name, _, attr = spec.partition(":")
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise SystemExit(f"trio-mcp: expected package.module:server, got {spec!r}")
    if app_dir is not None:
        where = os.path.abspath(app_dir)
        if where not in sys.path:
            sys.path.insert(0, where)
    module = _import_module(module_name, app_dir)
    attr = attr or "server"
    obj = getattr(module, attr, None)
    if obj is None:
        found = sorted(k for k, v in vars(module).items() if isinstance(v, Server))
        raise SystemExit(
            f"trio-mcp: module {module_name!r} ({_module_file(module)}) has no attribute "
            f"{attr!r}; "
            + (f"its trio_mcp.Server: {', '.join(found)}" if found else "it holds no "
               "trio_mcp.Server")
        )
    if callable(obj) and not isinstance(obj, Server):
        obj = obj()
    if not isinstance(obj, Server):
        raise SystemExit(f"trio-mcp: {spec!r} is not a trio_mcp.Server")
    return obj


def _import_module(name: str, app_dir: str | None) -> ModuleType:
    """``importlib.import_module(name)``, its failures told in one line (the traceback
    goes to the debug log)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            where = "" if app_dir is None else (
                f" in {os.path.abspath(app_dir)} (--app-dir, by default the working directory)"
                " nor"
            )
            raise SystemExit(
                f"trio-mcp: no module named {exc.name!r}{where} among the installed packages "
                "(sys.path)"
            ) from None
        failure: BaseException = exc
    except Exception as exc:
        failure = exc
    logging.getLogger("trio_mcp").debug("importing %s failed", name, exc_info=failure)
    raise SystemExit(
        f"trio-mcp: importing {name!r} raised {type(failure).__name__}: {failure}"
        f"{_where_raised(failure)} (--log-level debug shows the traceback)"
    ) from None


def _where_raised(exc: BaseException) -> str:
    """`` at file:line`` of the innermost frame of ``exc`` outside the import machinery."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" at {exc.filename}:{exc.lineno}"
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen ") and f.filename != __file__
    ]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def _module_file(module: ModuleType) -> str:
    return getattr(module, "__file__", None) or "a namespace package"


def _check_importable(spec: str, app_dir: str | None) -> None:
    """Before starting workers: stop with load_server's message if the module cannot be
    found at all (each worker imports it; a typo would restart them forever)."""
    module_name = spec.partition(":")[0]
    if app_dir is not None:
        where = os.path.abspath(app_dir)
        if where not in sys.path:
            sys.path.insert(0, where)
    try:
        found = importlib.util.find_spec(module_name) if module_name else None
    except (ImportError, ValueError):
        found = None
    if found is None:
        _import_module(module_name, app_dir)  # says why, in one line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trio-mcp", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve an MCP server over Streamable HTTP")
    serve.add_argument(
        "server", nargs="?", default="trio_mcp.demo:server",
        help="package.module:attribute of a trio_mcp.Server (default: the built-in demo)",
    )
    serve.add_argument(
        "--app-dir", default=".", metavar="DIR",
        help="the directory the server's module is imported from, before the installed "
        "packages (default: the working directory)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks one)")
    serve.add_argument("--path", default="/mcp", help="the MCP endpoint path (default /mcp)")
    serve.add_argument("--certfile", help="TLS certificate (PEM); serves HTTPS with --keyfile")
    serve.add_argument("--keyfile", help="TLS private key (PEM)")
    serve.add_argument(
        "--server", dest="http_server", choices=("trio-mcp", "hypercorn"), default="trio-mcp",
        help="the HTTP server: trio-mcp's own HTTP/1.1 server (default), or hypercorn, which "
        "hosts the ASGI app",
    )
    serve.add_argument(
        "--http", dest="http_parser", choices=("auto", "httptools", "h11"), default="auto",
        help="what reads requests on trio-mcp's own server: httptools, h11, or auto "
        "(httptools when installed; the default)",
    )
    serve.add_argument(
        "--json-response", action="store_true",
        help="answer requests with application/json instead of an SSE stream",
    )
    serve.add_argument(
        "--allow-origin", action="append", default=[],
        help="an Origin to accept besides loopback origins (repeatable; '*' for any)",
    )
    serve.add_argument(
        "--stats-port", type=int, default=None,
        help="serve the counters on 127.0.0.1:PORT: JSON at /stats, Prometheus at /metrics",
    )
    serve.add_argument(
        "--inspect", metavar="[HOST:]PORT", type=_inspect_address, default=None,
        help="serve the live task tree on loopback (127.0.0.1 unless HOST names another "
        "loopback address): a page at /, JSON at /tree.json (read it with `trio-mcp tree`)",
    )
    serve.add_argument(
        "--workers", type=int, default=1, metavar="N",
        help="serve with N worker processes on one port (default 1); 2025-11-25 "
        "sessions need one process, the stateless 2026-07-28 revision spreads over all",
    )
    serve.add_argument(
        "--shutdown-grace", type=_seconds, default=None, metavar="SECONDS",
        help="on SIGINT or SIGTERM, how long running handlers may take to finish before they "
        "are cancelled (default 10); a second Ctrl-C stops at once",
    )
    serve.add_argument(
        "--session-ttl", type=float, default=None, metavar="SECONDS",
        help="a 2025-11-25 session with nothing in flight ends after this long (default 1800)",
    )
    serve.add_argument(
        "--store", metavar="URL", default=None,
        help="keep 2025-11-25 sessions in Redis (redis://host:port/db) so that every worker "
        "serves them (needs coredis: pip install 'trio-mcp[redis]')",
    )
    # Set by the parent of --workers for each worker it starts (trio_mcp.cli._workers).
    serve.add_argument("--worker-port", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)
    serve.add_argument(
        "--log-level", default="info",
        choices=["debug", "info", "warning", "error", "critical"],
    )
    auth = serve.add_argument_group(
        "authorization (spec/authorization.md): every request needs a bearer token"
    )
    auth.add_argument(
        "--auth-resource", metavar="URL",
        help="this server's canonical URI, the audience its tokens must name "
        "(e.g. https://mcp.example.com/mcp); turns authorization on",
    )
    auth.add_argument("--auth-issuer", metavar="URL", help="the authorization server's issuer")
    auth.add_argument(
        "--auth-jwks-uri", metavar="URL", help="verify JWT access tokens with these keys"
    )
    auth.add_argument(
        "--auth-introspect", metavar="URL",
        help="verify tokens by introspection (RFC 7662) at this endpoint instead, as client "
        "--auth-client-id with the secret in $TRIO_MCP_AUTH_CLIENT_SECRET",
    )
    auth.add_argument("--auth-client-id", metavar="ID")
    auth.add_argument(
        "--auth-scope", action="append", default=[], metavar="SCOPE",
        help="a scope every request needs (repeatable)",
    )
    serve.add_argument(
        "--stdio", action="store_true",
        help="serve one host on stdin and stdout (the MCP stdio transport) instead of HTTP",
    )
    serve.add_argument(
        "--allocator", choices=ALLOCATORS, default=None,
        help="CPython's small-object allocator (default: the one PYTHONMALLOC names, else "
        f"{DEFAULT_ALLOCATOR}, which gives ended sessions' memory back; pymalloc is faster)",
    )
    serve.add_argument(
        "--gc-threshold", type=int, default=YOUNG_THRESHOLD, metavar="N",
        help="collect the cycle collector's young generation once N more objects were made "
        f"than freed (default: {YOUNG_THRESHOLD}; CPython's own is 700; 0 keeps the "
        "interpreter's)",
    )
    add_client_commands(sub)
    tree = sub.add_parser(
        "tree", help="print the live task tree of a server run with --inspect"
    )
    tree.add_argument(
        "url", help="the inspector's URL (http://127.0.0.1:PORT/, or its /tree.json)"
    )
    tour = sub.add_parser(
        "demo-tour",
        help="play four scenes against a live server while its task tree is on a page "
        "(docs/tour.md)",
    )
    tour.add_argument(
        "--pace", type=float, default=4.0, metavar="SECONDS",
        help="the pause after each step, to watch the page (default 4; 0: no pauses)",
    )
    tour.add_argument(
        "--no-pause", dest="pace", action="store_const", const=0.0, help="the same as --pace 0"
    )
    tour.add_argument(
        "--port", type=int, default=0, help="the server's port (default 0: a free one)"
    )
    tour.add_argument(
        "--inspect", metavar="[HOST:]PORT", type=_inspect_address, default=("127.0.0.1", 0),
        help="where the task tree's page is served, on loopback (default: a free port)",
    )
    tour.add_argument(
        "--stay", action="store_true",
        help="keep the server and its page up after the last scene, until Ctrl-C",
    )
    tour.add_argument(
        "--log-level", default="warning",
        choices=["debug", "info", "warning", "error", "critical"],
    )
    return parser


def _seconds(text: str) -> float:
    """A duration option's value: a finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not 0 or more seconds")
    return value


def _inspect_address(text: str) -> tuple[str, int]:
    """``--inspect``'s value: (host, port); the host must be a loopback address (TM-SEC-INSPECT)."""
    from ..edges.observe._inspect import check_loopback

    host, _, port = text.rpartition(":")
    host = host or "127.0.0.1"
    try:
        number = int(port)
        check_loopback(host)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 <= number < 65536:
        raise argparse.ArgumentTypeError(f"{port} is not a port number")
    return host, number


def _print_tree(url: str) -> None:
    """``trio-mcp tree URL``: the inspector's tree as indented text."""
    from ..edges.observe._inspect import fetch_tree, render_text

    try:
        doc = fetch_tree(url)
    except OSError as exc:
        raise SystemExit(f"trio-mcp: cannot read the tree at {url}: {exc}") from None
    sys.stdout.write(render_text(doc))


def _demo_tour(args: argparse.Namespace) -> None:
    """``trio-mcp demo-tour``: the guided tour of docs/tour.md; exits 1 when a scene did not
    go as it should."""
    import trio

    from ._tour import play

    if args.pace < 0:
        raise SystemExit("trio-mcp: --pace must be 0 or more")
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    host, port = args.inspect
    try:
        ok = trio.run(lambda: play(
            sys.stdout, pace=args.pace, port=args.port, inspect_host=host, inspect_port=port,
            stay=args.stay,
        ))
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    if not ok:
        raise SystemExit(1)


def main(argv: Sequence[str] | None = None, *, own_command_line: bool | None = None) -> None:
    """Run the command line ``argv`` (default: this process's). When it is this process's
    own command line (``own_command_line``, default: ``argv`` is None), ``serve`` first makes
    the interpreter run under the chosen allocator (TM-SESS-ALLOCATOR), which may start it
    again; a caller passing its own ``argv`` keeps its process as it is."""
    args = build_parser().parse_args(argv)
    if args.command in CLIENT_COMMANDS:
        sys.exit(run_client_command(args))
    if args.command == "tree":
        _print_tree(args.url)
        return
    if args.command == "demo-tour":
        _demo_tour(args)
        return
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if own_command_line or (own_command_line is None and argv is None):
        use_allocator(args.allocator)
        if args.gc_threshold > 0:
            use_collector_threshold(args.gc_threshold)
    import trio

    from ..base._config import HttpParser, ResponseMode, ServerConfig
    from ..edges._serve import user_timeout
    from ._workers import CANNOT_LOAD, secret_from_env

    if args.workers < 1:
        raise SystemExit("trio-mcp: --workers must be at least 1")
    if args.workers > 1 and args.stdio:
        raise SystemExit("trio-mcp: --stdio serves one host: it takes no --workers")
    if args.workers > 1 and args.worker_port is None:
        _run_pool(args, argv)
        return
    if args.stdio:
        from ..edges._stdio import reserve_stdout

        # TM-STDIO-STDOUT: before the server's module is imported (it may print).
        reserve_stdout()
    try:
        server = load_server(args.server, app_dir=args.app_dir)
    except SystemExit as exc:
        if args.worker_port is None:
            raise
        # TM-WORK-PROCESSES: a worker that cannot load the server says why and tells its
        # parent so, which stops instead of starting it again forever.
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr, flush=True)
        raise SystemExit(CANNOT_LOAD) from None
    config = ServerConfig(
        path=args.path,
        response_mode=ResponseMode.JSON if args.json_response else ResponseMode.SSE,
        allowed_origins=frozenset(args.allow_origin),
        auth=_auth_config(args),
        secret=secret_from_env(),
        workers=args.workers,
        store=args.store,
        http_parser=HttpParser(args.http_parser),
        **({} if args.session_ttl is None else {"session_idle_ttl": args.session_ttl}),
        **({} if args.shutdown_grace is None else {"shutdown_grace": args.shutdown_grace}),
    )
    if args.stdio:
        # spec/stdio.md: one host, on this process's stdin and stdout.
        trio.run(lambda: server.serve_stdio(config=config))
        return
    stats_port = args.stats_port
    worker = args.worker_port is not None
    # Bound here, before serving, so that a port in use is one line naming it.
    sock = _bind(
        args.host, args.worker_port if worker else args.port,
        user_timeout_ms=int(user_timeout(config) * 1000),
        # A worker of --workers: a listening socket of its own on the pool's port
        # (TM-WORK-PROCESSES).
        reuse_port=worker,
    )
    _log_interpreter_settings()
    if worker and stats_port:
        # Each worker's counters on a port of its own, next to the first worker's.
        stats_port += args.worker_index

    inspect_host, inspect_port = _inspect_at(args)

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

            async def on_signal() -> None:
                # TM-SESS-SHUTDOWN: SIGINT or SIGTERM starts the graceful shutdown; a second
                # one stops the process at once.
                async for signum in signals:
                    # A worker's parent sends SIGTERM after the terminal's SIGINT reached them
                    # all: only a second SIGINT stops a worker at once.
                    _stop_at_next_signal((signal.SIGINT,) if worker else _STOP_SIGNALS)
                    if not worker:
                        _say(
                            f"{signal.Signals(signum).name}: shutting down: no new "
                            "connections; running handlers get up to "
                            f"{config.shutdown_grace:g} s to finish (--shutdown-grace), then "
                            "are cancelled; Ctrl-C again stops at once"
                        )
                    return

            async with trio.open_nursery() as nursery:
                urls = await nursery.start(
                    lambda task_status: server.serve(
                        host=args.host, port=args.port, config=config,
                        certfile=args.certfile, keyfile=args.keyfile,
                        shutdown_trigger=on_signal, stats_port=stats_port,
                        http_server=args.http_server, sock=sock, announce=False,
                        inspect_host=inspect_host, inspect_port=inspect_port,
                        task_status=task_status,
                    )
                )
                for index, url in enumerate(urls):
                    if index == 0:
                        if worker:
                            continue  # the parent of the workers shows the endpoint, once
                        what = server.name
                    elif url.endswith("/stats"):
                        what = "counters"
                    else:
                        print(f"trio-mcp: serving the live task tree at {url}", flush=True)
                        continue
                    if worker:
                        what = f"worker {args.worker_index}'s {what}"
                    print(f"trio-mcp: serving {what} at {url}", flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        trio.run(run)


def _log_interpreter_settings() -> None:
    """The allocator and the collector's threshold, once the server is loaded and bound (a
    mistake in either is then the only line printed)."""
    log = logging.getLogger("trio_mcp")
    log.info("small objects from %s (TM-SESS-ALLOCATOR)", running_allocator())
    log.info(
        "young objects collected every %s (TM-SESS-GC)", use_collector_threshold(0) or "never"
    )


def _say(line: str) -> None:
    """A line for the person at the terminal, whatever the log level."""
    print(f"trio-mcp: {line}", file=sys.stderr, flush=True)


def _bind(host: str, port: int, *, user_timeout_ms: int | None, reuse_port: bool) -> socket.socket:
    """``listening_socket``, its failures told in one line: a port in use names the port and
    the option that picks another."""
    from ..edges._serve import listening_socket

    try:
        return listening_socket(
            host, port, user_timeout_ms=user_timeout_ms, reuse_port=reuse_port
        )
    except OSError as exc:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise SystemExit(
                f"trio-mcp: port {port} is already in use on {host} (another server "
                "listens there); choose another with --port PORT, or --port 0 for a free one"
            ) from None
        if exc.errno == errno.EACCES:
            raise SystemExit(
                f"trio-mcp: not allowed to listen on {where} (ports below 1024 need "
                "privileges); choose another with --port PORT"
            ) from None
        raise SystemExit(f"trio-mcp: cannot listen on {where}: {exc.strerror or exc}") from None


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop_at_next_signal(
    signums: Sequence[signal.Signals] = _STOP_SIGNALS, on_stop: Callable[[], None] | None = None
) -> None:
    """After the first SIGINT or SIGTERM: the next of ``signums`` ends the process at once,
    whatever it is doing, with the status of a process the signal killed (``on_stop``
    first). A plain signal handler, not trio's: it runs even while a handler blocks the
    event loop."""

    def stop(signum: int, frame: object) -> None:
        if on_stop is not None:
            on_stop()
        _say(f"{signal.Signals(signum).name} again: stopping at once")
        sys.stdout.flush()
        os._exit(128 + signum)

    for signum in signums:
        signal.signal(signum, stop)


def _inspect_at(args: argparse.Namespace) -> tuple[str, int | None]:
    """serve()'s inspector host and port from ``--inspect`` (a worker of --workers takes the
    port after the previous worker's, as with --stats-port); no port without it."""
    if args.inspect is None:
        return "127.0.0.1", None
    host, port = args.inspect
    if args.worker_port is not None and port:
        port += args.worker_index
    return host, port


def _run_pool(args: argparse.Namespace, argv: Sequence[str] | None) -> None:
    """The parent of ``--workers N``: bind, listen, start the workers and keep them running
    until SIGINT or SIGTERM, then stop them gracefully (TM-WORK-PROCESSES)."""
    import trio

    from ..base._config import ServerConfig
    from ._workers import ServerNotLoaded, WorkerPool, child_command, secret_from_env

    config = ServerConfig(
        **({} if args.shutdown_grace is None else {"shutdown_grace": args.shutdown_grace}),
    )
    _check_importable(args.server, args.app_dir)
    # The port, held for the workers: bound, never listening, so that the kernel hands no
    # connection to it, only to the workers' own sockets.
    sock = _bind(args.host, args.port, user_timeout_ms=None, reuse_port=True)
    _log_interpreter_settings()
    host, port = sock.getsockname()[:2]
    scheme = "https" if args.certfile else "http"
    shown = f"[{host}]" if ":" in host else host
    # TM-WORK-SECRET: one secret for every worker, so that each verifies the others'
    # cursors and requestStates; the deployment's own when it gives one.
    secret = secret_from_env() or os.urandom(32)
    pool = WorkerPool(
        command=child_command(sys.argv[1:] if argv is None else argv),
        port=port, count=args.workers, secret=secret,
        grace=config.shutdown_grace + 10.0,
    )

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                await nursery.start(pool.run)
                # Shown once a worker listens: until then the port refuses connections.
                with trio.fail_after(60):
                    while True:
                        try:
                            probe = await trio.open_tcp_stream(host, port)
                        except OSError:
                            await trio.sleep(0.05)
                            continue
                        await probe.aclose()
                        break
                print(
                    f"trio-mcp: serving at {scheme}://{shown}:{port}{args.path} with "
                    f"{args.workers} workers", flush=True,
                )
                async for signum in signals:
                    _stop_at_next_signal(on_stop=lambda: _kill(pool.pids.values()))
                    _say(
                        f"{signal.Signals(signum).name}: stopping the {args.workers} workers: "
                        "each gives its running handlers up to "
                        f"{config.shutdown_grace:g} s to finish (--shutdown-grace); Ctrl-C "
                        "again stops at once"
                    )
                    break
                nursery.cancel_scope.cancel()

    try:
        with contextlib.suppress(KeyboardInterrupt):
            trio.run(run)
    except* ServerNotLoaded as failed:
        first: BaseException = failed
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise SystemExit(f"trio-mcp: {first}; stopped") from None
    finally:
        sock.close()


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _auth_config(args: argparse.Namespace) -> AuthConfig | None:
    """The AuthConfig the --auth-* options describe; None without --auth-resource."""
    from ..base._config import AuthConfig
    from ..base._ports import TokenVerifier
    from ..runtime._auth import IntrospectionVerifier, JWTVerifier

    if args.auth_resource is None:
        return None
    if args.auth_issuer is None or (args.auth_jwks_uri is None) == (args.auth_introspect is None):
        raise SystemExit(
            "--auth-resource needs --auth-issuer and one of --auth-jwks-uri, --auth-introspect"
        )
    verifier: TokenVerifier
    if args.auth_jwks_uri is not None:
        verifier = JWTVerifier(
            issuer=args.auth_issuer, audience=args.auth_resource, jwks_uri=args.auth_jwks_uri
        )
    else:
        secret = os.environ.get("TRIO_MCP_AUTH_CLIENT_SECRET")
        if args.auth_client_id is None or secret is None:
            raise SystemExit(
                "--auth-introspect needs --auth-client-id and $TRIO_MCP_AUTH_CLIENT_SECRET"
            )
        verifier = IntrospectionVerifier(
            endpoint=args.auth_introspect, client_id=args.auth_client_id, client_secret=secret,
            audience=args.auth_resource, issuer=args.auth_issuer,
        )
    return AuthConfig(
        resource=args.auth_resource,
        authorization_servers=[args.auth_issuer],
        verifier=verifier,
        required_scopes=frozenset(args.auth_scope),
        scopes_supported=tuple(args.auth_scope),
    )

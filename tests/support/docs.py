# Reading the examples of the README and docs/, so that tests can run them as written.
from __future__ import annotations

import itertools
import re
import shlex

__all__ = ["SHOWN_URL", "code_blocks", "curl_request"]

#: The URL the examples show, which tests replace with the one actually served.
SHOWN_URL = "http://127.0.0.1:8000/mcp"


def code_blocks(text: str, language: str) -> list[str]:
    """The fenced ``language`` blocks of a Markdown text, in order."""
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def curl_request(command: str) -> tuple[list[tuple[str, str]], bytes]:
    """The headers and body of a documented `curl` command, a POST to SHOWN_URL."""
    words = shlex.split(command.replace("\\\n", " "))
    assert "curl" == words[0]
    assert SHOWN_URL in words
    headers: list[tuple[str, str]] = []
    body = b""
    for flag, value in itertools.pairwise(words):
        if flag == "-H":
            name, _, text = value.partition(":")
            headers.append((name.strip(), text.strip()))
        elif flag == "-d":
            body = value.encode()
    return headers, body

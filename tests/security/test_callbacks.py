"""A job's ``callback_url`` reaches only hosts the operator allowed, however it is spelt."""

from __future__ import annotations

import pytest

from ocrflow.service.callbacks import check_callback
from ocrflow.service.options import OptionError

ALLOWED = ("hooks.example",)


@pytest.mark.parametrize(
    "url",
    [
        "http://evil.example/hook",
        "http://hooks.example@evil.example/hook",
        "http://hooks.example:80@evil.example/",
        "http://evil.example#@hooks.example/",
        "http://evil.example\\@hooks.example/",
        "http://hooks.example.evil.example/",
        "http://hooks.example%2eevil.example/",
        "http://evil.example/?@hooks.example",
        "ftp://hooks.example/hook",
        "file:///etc/passwd",
        "http://hooks.example\r\nHost: evil.example/",
        "http://[::1]/hook",
        "http:///hooks.example/hook",
        "//hooks.example/hook",
    ],
)
def test_other_hosts_are_refused(url: str) -> None:
    with pytest.raises(OptionError, match="callback_url"):
        check_callback(url, ALLOWED)


@pytest.mark.parametrize(
    "url", ["http://hooks.example/hook", "https://HOOKS.example:8443/a/b?job=1"]
)
def test_allowed_hosts_pass(url: str) -> None:
    assert check_callback(url, ALLOWED) == url

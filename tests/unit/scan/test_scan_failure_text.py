"""How a failed scan is told (scan/client.py): the cause, what to do, the server's stderr."""

from __future__ import annotations

from zerto_rewind.errors import ZertoRewindError, describe
from zerto_rewind.scan.client import ScanError, _failure, _http_failure

# mcvsphere 0.2.3 started with no VCENTER_* variables, as its stderr reads (paths shortened).
MCVSPHERE_STDERR = """\
/venv/fastmcp/server/auth/providers/jwt.py:10: AuthlibDeprecationWarning: authlib.jose module \
is deprecated, please use joserfc instead.
It will be compatible before version 2.0.0.
  from authlib.jose import JsonWebKey, JsonWebToken
/venv/authlib/integrations/httpx_client/assertion_client.py:5: AuthlibDeprecationWarning: The \
httpx module is deprecated; please use httpx2 instead.
  from ._compat import httpx2
Traceback (most recent call last):
  File "/venv/bin/mcvsphere", line 8, in <module>
    sys.exit(main())
pydantic_core._pydantic_core.ValidationError: 3 validation errors for Settings
vcenter_host
  Field required [type=missing, input_value={}, input_type=dict]
"""


def test_the_servers_own_exception_leads_and_warnings_are_left_out() -> None:
    error = ScanError(_failure("mcvsphere", ConnectionError("closed"), MCVSPHERE_STDERR, 60))
    first = str(error).splitlines()[0]
    assert first.startswith(
        "could not list the tools of `mcvsphere`: the server stopped: "
        "pydantic_core._pydantic_core.ValidationError: 3 validation errors for Settings "
        "(ConnectionError: closed)"
    )
    assert "Warning" not in str(error)
    assert "compatible before version 2.0.0" not in str(error)
    assert "from authlib" not in str(error)
    assert str(error).endswith("Field required [type=missing, input_value={}, input_type=dict]")
    assert "vcenter_host" in str(error)


def test_the_advice_comes_right_after_the_cause() -> None:
    error: ZertoRewindError = ScanError(
        _failure("srv", ConnectionError("closed"), MCVSPHERE_STDERR, 60)
    )
    assert error.problem.endswith("(ConnectionError: closed)")
    assert error.advice.startswith("check the command and the environment it needs")


def test_without_a_traceback_the_client_side_error_is_the_cause() -> None:
    text = _failure("srv", TimeoutError(), "", 5)
    assert text.startswith("could not list the tools of `srv`: no answer within 5 s; check")
    assert "stderr" not in text


def test_a_long_stderr_is_cut_at_a_line() -> None:
    stderr = "".join(f"line {i:04d} of the server's log\n" for i in range(400))
    text = _failure("srv", ConnectionError("closed"), stderr, 60)
    tail = text.split("warnings left out:\n", 1)[1]
    assert tail.startswith("line ")
    assert tail.endswith("line 0399 of the server's log")


def test_a_failed_http_scan_says_what_to_do() -> None:
    """--url: the cause (all of it, an exception group's too), then the advice after a dash."""
    group = ExceptionGroup("tasks", [ConnectionError("refused"), TimeoutError()])
    error = ScanError(_http_failure("http://127.0.0.1:9/mcp", group, 5))
    assert error.problem == (
        "could not list the tools at http://127.0.0.1:9/mcp: "
        "ConnectionError: refused, no answer within 5 s"
    )
    assert error.advice.startswith("check that the server answers MCP at that URL")
    assert " — check that the server answers MCP" in describe(error)


def test_without_a_traceback_the_servers_last_line_is_the_cause() -> None:
    """A server that exits with a message of its own (sys.exit, argparse) leads with it."""
    stderr = (
        "/venv/x.py:3: DeprecationWarning: old module\n  import old\n"
        "starting mcvsphere\nVCENTER_HOST is required\n"
    )
    text = _failure("srv", ConnectionError("Connection closed"), stderr, 60)
    assert text.startswith(
        "could not list the tools of `srv`: the server stopped: VCENTER_HOST is required "
        "(ConnectionError: Connection closed); check the command"
    )
    assert text.endswith("starting mcvsphere\nVCENTER_HOST is required")
    # A server still running when the time was up did not stop: its log is no cause.
    slow = _failure("srv", TimeoutError(), "starting mcvsphere\n", 5)
    assert slow.startswith("could not list the tools of `srv`: no answer within 5 s; check")

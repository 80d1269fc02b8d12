"""The refusal pattern of pack tools: a reason code at the end of the message and in ``details["reason"]``.

A tool handler (or its eligibility) refuses with one call::

    refuse("not_active", f"loan {loan.loan_id} is already returned")   # the policy or the session says no
    fail("book_not_found", f"no book {args.book_id}")                    # the backend cannot do it

:func:`refuse` raises :class:`~pipelines.errors.IneligibleAction` (409 / FAILED_PRECONDITION),
:func:`fail` a :class:`~pipelines.errors.ToolError`; both end the message with ``[reason]``. The tool
registry turns either into a failed observation, and :func:`reason_from` reads the code back — the key the
turn looks the refusal text up by (``texts.refusals[reason]``; ``tandem domain check`` requires one for
every reason a pack's tools raise). A reason is a short snake_case code: ``[a-z][a-z0-9_]{0,63}``.
"""

from __future__ import annotations

import re
from typing import NoReturn

from pipelines.errors import IneligibleAction, ToolError
from pipelines.tools import ToolObservation

__all__ = ["refuse", "fail", "reason_of", "reason_from", "REASON_CODE", "NOT_CONFIRMED"]

#: What a reason code looks like.
REASON_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
#: The reason of a write attempted without the user's yes (the core refuses it at the tool port too).
NOT_CONFIRMED = "not_confirmed"


def _checked(reason: str) -> str:
    if not REASON_CODE.match(reason):
        raise ValueError(f"a reason code is snake_case ([a-z][a-z0-9_]{{0,63}}), not {reason!r}")
    return reason


def refuse(reason: str, message: str) -> NoReturn:
    """The policy or the session says no: :class:`~pipelines.errors.IneligibleAction` ``"message [reason]"``."""
    raise IneligibleAction(f"{message} [{_checked(reason)}]", details={"reason": reason})


def fail(reason: str, message: str) -> NoReturn:
    """The backend cannot do it (an unknown id, nothing left): :class:`~pipelines.errors.ToolError`."""
    raise ToolError(f"{message} [{_checked(reason)}]", details={"reason": reason})


def reason_of(message: str | None) -> str | None:
    """The reason code at the end of an error message (``"... [reason]"``), or ``None``."""
    if not message or not message.endswith("]") or "[" not in message:
        return None
    code = message[message.rindex("[") + 1 : -1]
    return code if REASON_CODE.match(code) else None


def reason_from(observation: ToolObservation) -> str | None:
    """A failed observation's reason: the code at the end of its message, else its error code
    (``invalid_input`` for arguments the tool's model refused); ``None`` for a success."""
    if observation.ok:
        return None
    return reason_of(observation.error_message) or observation.error_code

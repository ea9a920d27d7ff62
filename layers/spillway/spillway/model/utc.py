"""One reading of a time without an offset: as UTC.

AWS and the Kubernetes API server write times with an offset (``Z``), but a file written by hand
(``spillway plan --cluster``, a stored snapshot of an older build, a test) may not, and a naive time
cannot be compared with an aware one. Every module that compares times it did not make reads them
through :func:`aware`.
"""

from __future__ import annotations

from datetime import UTC, datetime


def aware(value: datetime) -> datetime:
    """``value`` as it is when it has an offset, else the same wall time in UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

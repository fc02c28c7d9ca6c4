"""Database URLs: the installed driver for a plain postgresql:// URL, and a check SQLAlchemy can use
one."""

from __future__ import annotations


def driver_url(url: str) -> str:
    """A plain postgresql:// URL names the driver that is installed (psycopg 3, else psycopg2)."""
    if not url.startswith(("postgresql://", "postgres://")):
        return url
    rest = url.split("://", 1)[1]
    try:
        import psycopg  # noqa: F401

        return f"postgresql+psycopg://{rest}"
    except ImportError:
        return f"postgresql+psycopg2://{rest}"


def check_database_url(value: str) -> str:
    """`value` when SQLAlchemy can parse it and its driver is installed, else ValueError saying
    why."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        dialect = make_url(driver_url(value)).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise ValueError(f"not a database URL SQLAlchemy understands ({exc})") from None
    try:
        dialect.import_dbapi()
    # E.g. postgresql+asyncpg:// without asyncpg: found now, not mid-command
    except ImportError as exc:
        raise ValueError(f"its database driver is not installed ({exc})") from None
    if getattr(dialect, "is_async", False):  # oomrl's engines are synchronous
        raise ValueError(
            f"{dialect.driver} is an async driver; name a synchronous one (e.g. "
            "postgresql+psycopg2://)"
        )
    return value

"""Tables on a terminal and on a pipe: rich tables whose cells are never cut short.

rich sizes a table to the console and elides what does not fit (`202…`). Here a console that is not
a terminal has no width limit. So a piped table keeps its natural width. Examples: `oomrl account
show | less`, a log file, a CI job. A terminal may be too narrow for a table. Then its columns are
printed in groups that each fit, the way pandas wraps a wide frame. The first column (the row's
name: a date, a symbol) is repeated in each. A cell is never cut: `--json` is there for machines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

PIPE_WIDTH = 10_000  # "no limit": rich needs a number; a table never pads itself to it
BORDER = 3  # what each column adds to a table's width: a rule and a space each side


def output_console(stderr: bool = False) -> Console:
    """The console of stdout (or stderr).

    It has the terminal's width on a terminal, and no limit on a pipe.
    """
    from rich.console import Console

    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=PIPE_WIDTH)


def rows_table(
    rows: list[dict[str, str]],
    title: str | None = None,
    numeric: set[str] | frozenset[str] = frozenset(),
    titles: list[str] | None = None,
    wrap_titles: bool = False,
) -> Table:
    """Formatted rows (titles with their units) as one table, numeric columns right-aligned.

    Each column is as wide as its longest cell and title. With `wrap_titles` it is as wide as its
    longest cell and title word.
    """
    from rich.table import Table

    table = Table(title=title)
    shown = titles if titles is not None else (list(rows[0]) if rows else [])
    for name in shown:
        table.add_column(
            name,
            justify="right" if name in numeric else "left",
            width=column_width(name, rows, wrap_titles),
        )
    for row in rows:
        table.add_row(*[row.get(name, "") for name in shown])
    return table


def column_width(name: str, rows: list[dict[str, str]], wrap_titles: bool = True) -> int:
    """The narrowest a column gets without cutting a cell.

    When titles wrap, no word of its title is cut either.
    """
    title = max((len(word) for word in name.split()), default=1) if wrap_titles else len(name)
    return max([title, 1] + [len(row.get(name, "")) for row in rows])


def table_width(titles: list[str], rows: list[dict[str, str]], wrap_titles: bool) -> int:
    return sum(column_width(name, rows, wrap_titles) + BORDER for name in titles) + 1


def column_groups(titles: list[str], rows: list[dict[str, str]], width: int) -> list[list[str]]:
    """The titles split into groups that each fit `width`, titles wrapped.

    Every group is led by the first.
    """
    if not titles:
        return [[]]
    first, groups = titles[0], [[titles[0]]]
    for name in titles[1:]:
        if table_width([*groups[-1], name], rows, True) > width and len(groups[-1]) > 1:
            groups.append([first])
        groups[-1].append(name)
    return groups


def print_rows(
    console: Console,
    rows: list[dict[str, str]],
    title: str,
    numeric: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Print formatted rows as one table.

    The terminal may be too narrow even with the titles wrapped. Then it prints several tables in
    turn, each titled `part i of n`.
    """
    titles = list(rows[0]) if rows else []
    if table_width(titles, rows, False) <= console.width:
        console.print(rows_table(rows, title, numeric))
        return
    groups = column_groups(titles, rows, console.width)
    for number, group in enumerate(groups, start=1):
        part = f"{title}, part {number} of {len(groups)}" if len(groups) > 1 else title
        console.print(rows_table(rows, part, numeric, group, wrap_titles=True))

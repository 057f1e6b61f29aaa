"""Plain-text tables: the one column layout of every table mqha prints (mqadmin, cluster status,
chaos verdicts, benchmark reports).

A small helper of our own rather than tabulate: the layouts are two, fixed by tests and the docs, and
tabulate's number alignment and padding rules would have to be switched off cell by cell to keep them.
"""

from collections.abc import Sequence


def columns(rows: Sequence[Sequence[str]], indent: str = "", gap: str = "  ") -> list[str]:
    """Left-aligned columns as wide as their widest cell, ``gap`` between them; no trailing spaces."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (indent + gap.join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))).rstrip()
        for row in rows
    ]


def pipe_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown pipe table (also readable as plain text): header, ``|---|`` separator, rows."""
    cells = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |"

    separator = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return [line(cells[0]), separator, *(line(row) for row in cells[1:])]

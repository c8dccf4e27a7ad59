"""The report page's building blocks: escaped text, tables, figures and the style sheet (screen
and print).

The page uses the window's width up to 1,280 CSS pixels, the two learning curves side by side
on a wide window and one above the other on a narrow one. Printed (or saved as PDF) it is black
on white, every figure full width, and no figure, table row or heading is split from what it
belongs to across a page break.
"""

from __future__ import annotations

import base64
import html
import time
from typing import Any

from jobs.cli.report_figures import Figure
from jobs.contract.credentials import redact


def page_text(value: Any) -> str:
    """Text for the page: escaped, and anything credential-shaped a run artifact carried (a
    restart reason, a file name) redacted."""
    return html.escape(redact(str(value)), quote=True)


def utc_text(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def hours_text(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def duration_text(seconds: float | None) -> str:
    """`42 s`, `12 min`, `3.4 h`."""
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def money_text(value: float | None, currency: str) -> str:
    return "unknown" if value is None else f"{value:,.2f} {currency}"


def html_table(rows: list[tuple[Any, ...]], header: tuple[str, ...] | None = None, cls: str = "",
               table_id: str = "") -> str:
    attrs = (f' id="{page_text(table_id)}"' if table_id else "") + (f' class="{page_text(cls)}"' if cls else "")
    out = [f"<table{attrs}>"]
    if header:
        out.append("<thead><tr>" + "".join(f"<th>{page_text(h)}</th>" for h in header) + "</tr></thead>")
    out.append("<tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{page_text(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def figure_html(fig: Figure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    axes = "; ".join(f"x: {x} / y: {y}" for x, y in fig.axes)
    return (f'<figure id="fig-{page_text(fig.name)}"><img src="data:image/png;base64,{data}" '
            f'alt="{page_text(fig.title)}: {page_text(fig.caption or axes)}">'
            f"<figcaption><b>{page_text(fig.title)}</b> <span class=\"axes\">{page_text(axes)}</span>"
            + (f'<br><span class="read">{page_text(fig.caption)}</span>' if fig.caption else "")
            + "</figcaption></figure>")


def figures_html(figures: list[Figure]) -> str:
    """Half-width figures in pairs (side by side on a wide window), the others full width."""
    parts: list[str] = []
    half = [f for f in figures if not f.wide]
    if half:
        parts.append('<div class="pair">' + "".join(figure_html(f) for f in half) + "</div>")
    parts += [figure_html(f) for f in figures if f.wide]
    return "\n".join(parts)


REPORT_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;padding:20px 28px 40px;
 max-width:1280px;color:#1d1d1f;line-height:1.4;background:#fff}
h1{font-size:24px;margin:0 0 4px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}
h2{font-size:17px;margin:30px 0 8px;padding-bottom:3px;border-bottom:1px solid #d0d0d5}
.sub{color:#5f6368;font-size:13px} .note{font-size:13px;color:#8a5a00}
figure{margin:10px 0} img{width:100%;height:auto;display:block}
figcaption{font-size:12.5px;color:#3c4043;margin-top:2px} .axes{color:#80868b} .read{color:#3c4043}
.pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:0 18px}
table{border-collapse:collapse;font-size:13px;margin:8px 0} td,th{border:1px solid #dadce0;padding:3px 8px;
 text-align:left;vertical-align:top} th{background:#f1f3f4;font-weight:600}
table.wide{width:100%} tbody tr:nth-child(even) td{background:#fafafa}
.cards{display:flex;gap:10px 32px;flex-wrap:wrap;margin:14px 0 4px}
.card{padding:4px 0} .label{font-size:12px;color:#5f6368} .big{font-size:26px;font-weight:600}
dl.summary{display:grid;grid-template-columns:repeat(auto-fill,minmax(380px,1fr));gap:2px 28px;margin:6px 0;font-size:13.5px}
dl.summary div{display:flex;gap:10px;border-bottom:1px dotted #e0e0e0;padding:3px 0}
dl.summary dt{flex:0 0 110px;color:#5f6368} dl.summary dd{margin:0;min-width:0;overflow-wrap:anywhere}
.banner{border:2px solid #b3261e;background:#fce8e6;color:#601410;padding:10px 14px;margin:12px 0;
 font-weight:600;font-size:14px}
pre.command{background:#f1f3f4;border:1px solid #dadce0;padding:8px 12px;font-size:13px;overflow-x:auto;
 white-space:pre-wrap}
@media print{
 @page{size:A4;margin:12mm}
 body{max-width:none;padding:0;font-size:11px;color:#000}
 h2{break-after:avoid;page-break-after:avoid}
 figure,table,tr,dl.summary div,.banner,pre.command,.cards{break-inside:avoid;page-break-inside:avoid}
 .pair{display:block}
 th,tbody tr:nth-child(even) td,pre.command{background:#fff}
 .banner{background:#fff;color:#000;border:3px solid #000}
 a{color:#000;text-decoration:none}
}
"""

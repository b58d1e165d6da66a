"""The text formats of docs/formats.md: the `SUBTASK BRIEF` and `<subtask_summary>` blocks.

`Brief.render`/`Brief.parse` and `Summary.render`/`Summary.parse` are the public
way in; these are the functions behind them. One value per line, JSON when plain
text would not read back the same (`values`); one attempt per line (`attempts`);
the reference table's `## subtask_summary` markdown, read only (`markdown`).
Every reader is one pass over its text (tests/test_text_parsing_cost.py).
"""

from actors.textblocks.brief import parse_brief, render_brief
from actors.textblocks.summary import parse_summary, render_summary

__all__ = ["parse_brief", "parse_summary", "render_brief", "render_summary"]

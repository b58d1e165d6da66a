"""A key no store could keep is refused at `dispatch`, the same with either store and
without one, with one error that says what to fix; nothing is changed by it and the next
dispatch works (docs/design.md, "Keys")."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors import Brief, Context, Status
from supervisor import Zeus
from supervisor.rules.delegation import MAX_KEY_BYTES


def done(brief: Brief, ctx: Context) -> str:
    return f"{brief.scope} done"


BAD = {
    "a NUL": ("deploy\0prod", "holds no NUL (0x00) character; this one has one at index 6"),
    "too long": ("k" * (MAX_KEY_BYTES + 1), f"at most {MAX_KEY_BYTES} bytes (UTF-8); this "
                 f"one is {MAX_KEY_BYTES + 1}"),
    "too long in UTF-8": ("é" * (MAX_KEY_BYTES // 2 + 1), f"this one is {MAX_KEY_BYTES + 2}"),
    "empty": ("", "pass key=None for no key"),
    "not a string": (7, "a dispatch key is a string, not int"),
}


@pytest.mark.parametrize("where", ["memory", "sqlite", "postgres"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_key_is_refused_at_dispatch_and_changes_nothing(
    request: pytest.FixtureRequest, tmp_path: Path, case: str, where: str
) -> None:
    key, says = BAD[case]
    store = {"memory": None, "sqlite": str(tmp_path / "zeus.db")}.get(where) or (
        str(request.getfixturevalue("pg_url")) if where == "postgres" else None)
    with Zeus.start(agents={"apollo": done}, store=store) as zeus:
        with pytest.raises(ValueError, match="a dispatch key") as refused:
            zeus.dispatch(Brief(agent="apollo", scope="first"), key=key)  # type: ignore[arg-type]
        assert says in str(refused.value)
        handle = zeus.dispatch(Brief(agent="apollo", scope="next"), key="deploy")
        summary = handle.result(timeout=30)
        assert summary.status is Status.completed and summary.id == "apollo-1"


def test_the_longest_key_is_kept_and_found_again_on_the_store(store_url: str) -> None:
    key = "k" * MAX_KEY_BYTES
    with Zeus.start(agents={"apollo": done}, store=store_url) as zeus:
        first = zeus.dispatch(Brief(agent="apollo", scope="x"), key=key).result(timeout=30)
    with Zeus.start(agents={"apollo": done}, store=store_url) as zeus:
        again = zeus.dispatch(Brief(agent="apollo", scope="x"), key=key).result(timeout=30)
    assert first.status is Status.completed and again.id == first.id

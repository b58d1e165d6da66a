"""The store's keys in routing.yml (`supervisor.store`, `supervisor.orphan_grace_s`) and the
agent policy's `idempotent`: defaults, good values, and errors with file, line and key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor import Routing
from supervisor.routing import StorePolicy
from tests.test_routing import assert_names, line_of, problems, write


def test_without_a_store_section_there_is_no_store_and_no_orphan_grace(tmp_path: Path) -> None:
    path, _ = write(tmp_path, "agents: {apollo: {}}\n")
    routing = Routing.load(path)
    assert routing.supervisor.store == StorePolicy(path=None, synchronous="normal", keep_days=30)
    assert routing.supervisor.orphan_grace(stored=False) == 0
    assert routing.supervisor.orphan_grace(stored=True) == 30
    assert routing.agents["apollo"].idempotent is False


def test_the_store_section_and_idempotent_are_read(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """
        defaults: {idempotent: true}
        supervisor:
          store: {path: zeus.db, synchronous: full, keep_days: 7}
          orphan_grace_s: 5
        agents:
          apollo: {}
          talos: {idempotent: false}
        """)
    routing = Routing.load(path)
    assert routing.supervisor.store == StorePolicy(path="zeus.db", synchronous="full",
                                                   keep_days=7)
    assert routing.supervisor.orphan_grace(stored=False) == 5
    assert routing.agents["apollo"].idempotent and not routing.agents["talos"].idempotent


@pytest.mark.parametrize(("body", "needle", "key_path", "parts"), [
    ("supervisor:\n  store: {path: z.db, synchronous: sometimes}\n", "synchronous",
     "supervisor.store.synchronous", ("found 'sometimes'", "'normal'", "'full'")),
    ("supervisor:\n  store: {keep_days: 0}\n", "keep_days", "supervisor.store.keep_days",
     ("found 0",)),
    ("supervisor:\n  store: {pth: z.db}\n", "pth", "supervisor.store.pth",
     ("unknown key 'pth'", "did you mean 'path'?")),
    ("supervisor:\n  orphan_grace_s: -1\n", "orphan_grace_s", "supervisor.orphan_grace_s",
     ("found -1",)),
    ("agents:\n  apollo: {idempotant: true}\n", "idempotant", "agents.apollo.idempotant",
     ("unknown key 'idempotant'", "did you mean 'idempotent'?")),
    ("agents:\n  apollo: {idempotent: maybe}\n", "idempotent", "agents.apollo.idempotent",
     ("found 'maybe'",)),
])
def test_a_bad_store_key_names_the_file_line_and_key(
    tmp_path: Path, body: str, needle: str, key_path: str, parts: tuple[str, ...]
) -> None:
    message, path, text = problems(tmp_path, body)
    assert_names(message, path, line_of(text, needle), key_path, *parts)

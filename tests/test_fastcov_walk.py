"""The fast path's syntax walk (``fastcov.unit.walk``, an explicit stack) visits the nodes a
recursive walk visits, in the same order: every emulation and instrumentation pass depends on
source order (insertions, the first declaration found), on real testbenches."""

from __future__ import annotations

import pytest
from conftest import STIMULUS, needs_cases
from pyslang import syntax

from reward_service.fastcov.instrument import parse
from reward_service.fastcov.unit import walk

TESTBENCHES = sorted(STIMULUS.glob("*/*.sv"))


def recursive(node):
    for child in node:
        if isinstance(child, syntax.SyntaxNode):
            yield child
            yield from recursive(child)


@needs_cases
@pytest.mark.parametrize("path", TESTBENCHES[:6], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_walk_matches_the_recursive_walk(path):
    (source,), _ = parse({path.name: path.read_text()})
    root = source.tree.root
    expected = list(recursive(root))
    found = list(walk(root))
    assert len(found) == len(expected) > 50
    assert [(n.kind, source.offsets(n)) for n in found] == [(n.kind, source.offsets(n)) for n in expected]
    assert source.nodes() is source.nodes()  # listed once per file
    assert [n.kind for n in source.nodes()] == [n.kind for n in expected]

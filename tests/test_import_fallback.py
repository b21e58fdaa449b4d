"""Imports with a fallback (``try: from external import X / except
ImportError: from analysed import X``) bind the analysed alternative when
the external module is not analysed, and the first one when both are."""

from __future__ import annotations

from kvflowmap.api import Request, analyse

HOST = """try:
    from extpkg.adapter import Adapter
except ImportError:
    from hostpkg.fallback import Adapter


class Conn:
    def __init__(self):
        self._adapter = Adapter()

    def get_finished(self, finished_req_ids):
        return self._adapter.get_finished(finished_req_ids)
"""
FALLBACK = """class Adapter:
    def get_finished(self, finished_req_ids):
        return None, set(finished_req_ids)
"""


def callees(analysis, fqn: str) -> list[str]:
    return sorted(t for _, t, k in analysis.graph.out_edges(fqn, data="kind") if k == "call")


def test_the_analysed_fallback_wins_over_a_missing_external_module(tree):
    root = tree({"hostpkg/__init__.py": "", "hostpkg/conn.py": HOST,
                 "hostpkg/fallback.py": FALLBACK})
    a = analyse(Request(sources=[str(root)]))
    assert callees(a, "hostpkg.conn.Conn.get_finished") == [
        "hostpkg.fallback.Adapter.get_finished"]


def test_the_first_import_wins_when_both_are_analysed(tree):
    root = tree({"hostpkg/__init__.py": "", "hostpkg/conn.py": HOST,
                 "hostpkg/fallback.py": FALLBACK, "extpkg/__init__.py": "",
                 "extpkg/adapter.py": FALLBACK})
    a = analyse(Request(sources=[str(root)]))
    assert callees(a, "hostpkg.conn.Conn.get_finished") == [
        "extpkg.adapter.Adapter.get_finished"]

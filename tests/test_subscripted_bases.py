"""A base written as a subscripted generic (``Runner["Task"]``,
``mod.Runner[int]``) stands for its class, in the class model and in the
names compat resolves; ``Generic[...]``/``Protocol[...]`` as before."""

from __future__ import annotations

from kvflowmap.api import analyse
from kvflowmap.compat.connector import ConnectorCode
from kvflowmap.compat.surface_cache import cached_parser
from kvflowmap.index.cache import FactCache
from kvflowmap.model.classes import base_name
from kvflowmap.request import Request

PKG = {
    "pkg/__init__.py": "",
    "pkg/runner.py": '''
        from typing import Generic, TypeVar

        T = TypeVar("T")


        class Runner(Generic[T]):
            def submit(self, task: T) -> None:
                self._spawn(task)

            def _spawn(self, task: T) -> None:
                self._run(task)

            def _run(self, task: T) -> None:
                raise NotImplementedError
        ''',
    "pkg/send.py": '''
        from typing import Generic, TypeVar

        from pkg import runner
        from pkg.runner import Runner

        T = TypeVar("T")


        class Sender(Runner["SendTask"]):
            def push(self, task) -> None:
                self.submit(task)

            def _run(self, task) -> None:
                pass


        class Dotted(runner.Runner[int]):
            def go(self) -> None:
                self._spawn(1)


        class Both(Generic[T], Runner[T]):
            pass
        ''',
}


def test_base_name() -> None:
    assert base_name('Runner["SendTask"]') == "Runner"
    assert base_name("mod.Runner[int, str]") == "mod.Runner"
    assert base_name("Generic[T]") == "Generic"
    assert base_name("Runner") == "Runner"
    assert base_name("make_base(x[0])") == "make_base(x[0])"  # not a subscripted name


def test_subscripted_bases_in_the_class_model(tree) -> None:
    a = analyse(Request(sources=[str(tree(PKG) / "pkg")], use_cache=False))
    classes = a.linker.classes
    assert classes.bases["pkg.send.Sender"] == ("pkg.runner.Runner",)
    assert classes.bases["pkg.send.Dotted"] == ("pkg.runner.Runner",)
    assert classes.bases["pkg.send.Both"] == ("typing.Generic", "pkg.runner.Runner")
    assert classes.bases["pkg.runner.Runner"] == ("typing.Generic",)
    assert classes.find_member("pkg.send.Sender", "submit") == "pkg.runner.Runner.submit"
    g = a.graph
    # self.submit() and self._spawn() reach the inherited methods; the base's
    # self._run() dispatches to the override
    assert g.has_edge("pkg.send.Sender.push", "pkg.runner.Runner.submit")
    assert g.has_edge("pkg.send.Dotted.go", "pkg.runner.Runner._spawn")
    assert g.has_edge("pkg.runner.Runner._run", "pkg.send.Sender._run")
    assert not [u for u in a.unresolved if u.caller.startswith("pkg.")]


def test_subscripted_bases_in_compat(tree, tmp_path) -> None:
    root = tree(PKG)
    code = ConnectorCode([root / "pkg"], cached_parser(FactCache(tmp_path / "facts")))
    assert code.classes["pkg.send.Sender"].bases == ("pkg.runner.Runner",)
    assert code.classes["pkg.send.Dotted"].bases == ("pkg.runner.Runner",)
    # typing's own generic bases stay as written
    assert code.classes["pkg.send.Both"].bases == ("Generic[T]", "pkg.runner.Runner")
    assert code.ancestors("pkg.send.Sender") == ["pkg.send.Sender", "pkg.runner.Runner"]
    assert code.external_bases("pkg.send.Sender") == ["Generic[T]"]
    assert "submit" in code.methods("pkg.send.Sender")

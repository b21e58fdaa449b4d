"""One LibCST pass over one file, producing ``FileFacts``.

No metadata provider is resolved: qualified-name and scope providers cost
5-10x the parse and do not follow re-exports or ``self.x`` types anyway, so
linking is done later over the facts (see ``kvflowmap.model``); and positions
are counted during the walk itself (see ``kvflowmap.index.lines``).
"""

from __future__ import annotations

import re

import libcst as cst

from kvflowmap.facts import (
    CONTAINER_METHODS,
    DEF_MARK,
    AssignFact,
    CallFact,
    ClassFact,
    ContainerOpFact,
    FileFacts,
    FunctionFact,
    ImportFact,
    LogFact,
    Param,
    RefFact,
)
from kvflowmap.index.extract_data import DataFactsMixin
from kvflowmap.index.lines import LineTracker
from kvflowmap.index.stmts import StmtTreeMixin
from kvflowmap.index.text import (chain, docstring, keyed_chain, literal_string, naming_lambdas,
                                  node_code)
from kvflowmap.index.walker import Walker

LOG_LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical"}
# Literal displays whose methods a call can name (``<str>.join``; resolved to
# ``<builtin>.str.join``).
_LITERAL_TYPES: dict[type, str] = {
    cst.SimpleString: "str", cst.ConcatenatedString: "str", cst.FormattedString: "str",
    cst.List: "list", cst.ListComp: "list", cst.Dict: "dict", cst.DictComp: "dict",
    cst.Set: "set", cst.SetComp: "set", cst.Tuple: "tuple", cst.Integer: "int",
    cst.Float: "float",
}


def extract_module(module: cst.Module, facts: FileFacts, source: str) -> FileFacts:
    """Fill ``facts`` from a parsed module (of text ``source``) and return it."""
    visitor = _FactVisitor(module, facts, source)
    with naming_lambdas(visitor.lambda_name):
        Walker(visitor).walk(module)
    facts.type_ignores = _type_ignores(source)
    return facts


_TYPE_IGNORE = re.compile(r"#\s*type:\s*ignore")


def _type_ignores(source: str) -> tuple[int, ...]:
    """Lines with a ``# type: ignore`` comment (a match inside a string
    literal counts too: rare, and it only makes a rule quieter)."""
    if "type:" not in source:
        return ()
    return tuple(sorted({source.count("\n", 0, m.start()) + 1
                         for m in _TYPE_IGNORE.finditer(source)}))


class _FactVisitor(DataFactsMixin, StmtTreeMixin, LineTracker, cst.CSTVisitor):
    def __init__(self, module: cst.Module, facts: FileFacts, source: str) -> None:
        self.module = module
        self.facts = facts
        self._init_lines(module, source)
        self._pending_refs: dict[int, str] = {}
        self._displays: list[str] = []  # ids of nested displays (``ElementFact.group``)
        self._classes: list[dict] = []
        self.scope: list[str] = []  # qualname parts
        self._scope_names: dict[tuple[str, ...], str] = {}
        self.class_stack: list[str | None] = [None]
        self.func_stack: list[dict] = []
        self.type_checking = 0
        self.guards = 0  # enclosing ``try`` and ``if`` statements (ImportFact.guarded)
        self.called: set[int] = set()  # ids of nodes that are a call's func
        self.awaited: set[int] = set()
        self.attr_names: set[int] = set()  # ids of Name nodes that are an Attribute's attr
        # ids of what a difference takes away (``done - self._failed``,
        # ``done.difference(self._failed)``): read, but nothing of it flows on,
        # so it is no name of the statement
        self.subtracted: set[int] = set()
        self._init_stmts()
        self._lambdas: dict[int, str] = {}
        self._lambda_counts: dict[str, int] = {}

    # -- helpers -------------------------------------------------------------
    def _pos(self, node: cst.CSTNode, token: str | None = None) -> tuple[int, int]:
        """(line, column) of a node being visited now."""
        line = self.node_line(node)
        if token is None:
            token = (chain(node) or "").split(".")[0].rstrip("()[]") or None
        return line, self.col_of(line, token)

    @property
    def _scope(self) -> str:
        # One string object per scope: every fact of a scope shares it in
        # memory while the file is extracted.
        key = tuple(self.scope)
        found = self._scope_names.get(key)
        if found is None:
            found = self._scope_names[key] = ".".join(key)
        return found

    def _code(self, node: cst.CSTNode | None) -> str | None:
        return None if node is None else node_code(self.module, node)

    def _add_assign(self, fact: AssignFact) -> None:
        if self._straight():
            fact = fact._replace(straight=True)
        self.facts.assigns.append(fact)
        self._event("assign", len(self.facts.assigns) - 1)

    def _annotation(self, ann: cst.Annotation | None) -> str | None:
        return None if ann is None else self._code(ann.annotation)

    # -- definitions ---------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        qual = ".".join([*self.scope, node.name.value])
        line, col = self._pos(node, "class")
        attrs, members = _class_body_names(self, node)
        self._classes.append(dict(
            qualname=qual, name=node.name.value, line=line, col=col,
            bases=tuple(self._code(a.value) or "" for a in node.bases if a.keyword is None),
            decorators=tuple(self._code(d.decorator) or "" for d in node.decorators),
            doc=docstring(node.body), attributes=attrs, members=members,
        ))
        for d in node.decorators:
            self._record_value_refs(d.decorator)
        return True

    # Bases, decorators and defaults run in the enclosing scope: the new
    # scope starts at the body.
    def visit_ClassDef_body(self, node: cst.ClassDef) -> None:
        self.scope.append(node.name.value)
        self.class_stack.append(".".join(self.scope))
        self._push_frame()

    def leave_ClassDef_body(self, node: cst.ClassDef) -> None:
        self._pop_frame()
        self.scope.pop()
        self.class_stack.pop()

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.facts.classes.append(ClassFact(end_line=self.line - 1, **self._classes.pop()))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        qual = ".".join([*self.scope, node.name.value])
        line, col = self._pos(node, "def")
        decorators = tuple(self._code(d.decorator) or "" for d in node.decorators)
        deco_line = self.line + len(node.leading_lines)
        placed = []
        for d in node.decorators:
            deco_line += len(d.leading_lines)
            placed.append((d.decorator, deco_line))
            deco_line += self.module.code_for_node(d).count("\n") - len(d.leading_lines)
        # Applied innermost first: each decorator takes what the one below returned.
        applied = f"{DEF_MARK}{node.name.value}"
        for deco, at in reversed(placed):
            applied = self._record_decorator_call(deco, at, applied)
        self.func_stack.append({"qual": qual, "node": node, "line": line, "col": col,
                                "decorators": decorators, "generator": False,
                                "cls": self.class_stack[-1], "body": ()})
        return True

    def visit_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self.scope.append(node.name.value)
        self.class_stack.append(None)
        self._push_frame()

    def leave_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self.func_stack[-1]["body"] = self._pop_frame()
        self.scope.pop()
        self.class_stack.pop()

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        info = self.func_stack.pop()
        body = info["body"]
        node = original_node
        decorators = info["decorators"]
        self.facts.functions.append(
            FunctionFact(
                qualname=info["qual"], name=node.name.value, line=info["line"],
                col=info["col"], end_line=self.line - 1,
                params=self._params(node.params), returns=self._annotation(node.returns),
                decorators=decorators, is_async=node.asynchronous is not None,
                is_generator=info["generator"], doc=docstring(node.body),
                class_qualname=info["cls"],
                abstract=any(d.split(".")[-1] == "abstractmethod" for d in decorators),
                body=body,
            )
        )

    def _params(self, params: cst.Parameters) -> tuple[Param, ...]:
        out: list[Param] = []
        for kind, group in (("posonly", params.posonly_params), ("pos", params.params)):
            for p in group:
                out.append(Param(p.name.value, kind, self._annotation(p.annotation),
                                 self._code(p.default)))
        if isinstance(params.star_arg, cst.Param):
            p = params.star_arg
            out.append(Param(p.name.value, "vararg", self._annotation(p.annotation)))
        for p in params.kwonly_params:
            out.append(Param(p.name.value, "kwonly", self._annotation(p.annotation),
                             self._code(p.default)))
        if params.star_kwarg is not None:
            p = params.star_kwarg
            out.append(Param(p.name.value, "kwarg", self._annotation(p.annotation)))
        return tuple(out)

    def lambda_name(self, node: cst.Lambda) -> str:
        """``<lambdaN>``: the N-th lambda met in the current scope (PyCG's naming)."""
        found = self._lambdas.get(id(node))
        if found is None:
            scope = self._scope
            self._lambda_counts[scope] = n = self._lambda_counts.get(scope, 0) + 1
            found = self._lambdas[id(node)] = f"<lambda{n}>"
        return found

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        # A lambda is a function node of its own (its calls are its edges,
        # its parameters bind what its callers pass). Its calls stay events
        # of the enclosing statement, so the lifecycle model still reads a
        # callback's body with the function that registers it.
        name = self.lambda_name(node)
        line, col = self._pos(node, "lambda")
        self.facts.refs.append(RefFact(self._scope, name, line, col))
        self.func_stack.append({"qual": ".".join([*self.scope, name]), "line": line,
                                "col": col, "cls": None})
        self.scope.append(name)
        self.class_stack.append(None)
        self._return(node.body, node, event=False)
        return True

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        info = self.func_stack.pop()
        self.scope.pop()
        self.class_stack.pop()
        self.facts.functions.append(FunctionFact(
            qualname=info["qual"], name=info["qual"].rpartition(".")[2], line=info["line"],
            col=info["col"], end_line=self.line, params=self._params(original_node.params),
            returns=None, decorators=(), is_async=False, is_generator=False, doc=None,
            class_qualname=None))

    # -- imports -------------------------------------------------------------
    def visit_If(self, node: cst.If) -> bool:
        self.guards += 1
        self.truth(node.test, node)
        if (chain(node.test) or "").split(".")[-1] == "TYPE_CHECKING":
            self.type_checking += 1
        return True

    def leave_If(self, original_node: cst.If) -> None:
        self.guards -= 1
        if (chain(original_node.test) or "").split(".")[-1] == "TYPE_CHECKING":
            self.type_checking -= 1

    def visit_Try(self, node: cst.Try) -> bool:
        self.guards += 1
        return True

    def leave_Try(self, original_node: cst.Try) -> None:
        self.guards -= 1

    def visit_TryStar(self, node: cst.TryStar) -> bool:
        self.guards += 1
        return True

    def leave_TryStar(self, original_node: cst.TryStar) -> None:
        self.guards -= 1

    def visit_Import(self, node: cst.Import) -> bool:
        line, _ = self._pos(node)
        for alias in node.names:
            name = chain(alias.name) or ""
            asname = chain(alias.asname.name) if alias.asname else None
            self.facts.imports.append(ImportFact(self._scope, name, None, asname, 0, line,
                                                 self.type_checking > 0, self.guards > 0,
                                                 self._gates()))
        return self._skip(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        line, _ = self._pos(node)
        module = chain(node.module) if node.module else ""
        level = len(node.relative)
        if isinstance(node.names, cst.ImportStar):
            self.facts.imports.append(ImportFact(self._scope, module or "", "*", None, level,
                                                 line, self.type_checking > 0, self.guards > 0,
                                                 self._gates()))
            return self._skip(node)
        for alias in node.names:
            name = chain(alias.name) or ""
            asname = chain(alias.asname.name) if alias.asname else None
            self.facts.imports.append(ImportFact(self._scope, module or "", name, asname, level,
                                                 line, self.type_checking > 0, self.guards > 0,
                                                 self._gates()))
        return self._skip(node)

    def _skip(self, node: cst.CSTNode) -> bool:
        """Do not walk into ``node``, but count the lines it spans."""
        self.line += self.module.code_for_node(node).count("\n")
        return False

    # -- calls ---------------------------------------------------------------
    def visit_Await(self, node: cst.Await) -> bool:
        if isinstance(node.expression, cst.Call):
            self.awaited.add(id(node.expression))
        return True

    def visit_Call(self, node: cst.Call) -> bool:
        self.called.add(id(node.func))
        if type(node.func) is cst.Attribute and node.func.attr.value == "difference":
            self.subtracted.update(id(a.value) for a in node.args)
        callee = chain(node.func)
        if callee is None and type(node.func) is cst.Attribute:
            # ``" ".join(xs)``, ``{}.items()``: a method of the literal's builtin type
            kind = _LITERAL_TYPES.get(type(node.func.value))
            callee = f"<{kind}>.{node.func.attr.value}" if kind else None
        line, col = self._pos(node)
        pos_args = [a for a in node.args if a.keyword is None and not a.star]
        self.facts.calls.append(
            CallFact(
                scope=self._scope, callee=callee, line=line, col=col,
                args=tuple(chain(a.value) for a in pos_args),
                kwargs=tuple((a.keyword.value, chain(a.value)) for a in node.args if a.keyword),
                literal_args=tuple(literal_string(a.value) for a in pos_args),
                awaited=id(node) in self.awaited,
                keyed=keyed_chain(node.func) if callee and "[" in callee else None,
            )
        )
        self._event("call", len(self.facts.calls) - 1)
        if callee and "." in callee:
            base, _, meth = callee.rpartition(".")
            if meth in CONTAINER_METHODS:
                key = self._code(pos_args[0].value) if pos_args else None
                self.facts.containers.append(ContainerOpFact(self._scope, base, meth, key, line, col))
                self._event("container", len(self.facts.containers) - 1)
                self._container_puts(base, meth, node)
            if meth in LOG_LEVELS and "log" in base.split(".")[-1].lower() and node.args:
                msg = literal_string(node.args[0].value)
                if msg is not None:
                    self.facts.logs.append(LogFact(self._scope, meth, msg, line, col))
        for a in node.args:
            self._record_value_refs(a.value)
        return True

    def _record_decorator_call(self, deco: cst.BaseExpression, line: int, arg: str) -> str:
        """Record a decorator as the calls it makes at definition time, from
        the enclosing scope: ``@dec`` is ``dec(arg)``, ``@make(x)`` is
        ``make(x)`` and then ``make()(arg)``. ``arg`` is what it is applied
        to: the undecorated function (``DEF_MARK`` + its name) or what the
        decorator below returned (``dec2()``). Returns the chain of what this
        one returns, for the next decorator up."""
        target = deco.func if isinstance(deco, cst.Call) else deco
        name = chain(target)
        if not name:
            return arg
        col = self.col_of(line, name.split(".")[0])
        if isinstance(deco, cst.Call):
            self.facts.calls.append(CallFact(self._scope, name, line, col))
            name += "()"
        self.facts.calls.append(CallFact(self._scope, name, line, col, args=(arg,)))
        return f"{name}()"

    def _record_value_refs(self, value: cst.BaseExpression) -> None:
        """Names used as values may be functions handed on as callbacks."""
        items: list[cst.BaseExpression] = [value]
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            items = [e.value for e in value.elements]
        elif isinstance(value, cst.Dict):
            items = [e.value for e in value.elements if isinstance(e, cst.DictElement)]
        for item in items:
            if isinstance(item, (cst.Name, cst.Attribute)):
                name = chain(item)
                if name and name not in ("None", "True", "False", "self"):
                    # Recorded when the walk reaches it, so its line is exact.
                    self._pending_refs[id(item)] = name

    def _ref_reached(self, node: cst.CSTNode) -> None:
        name = self._pending_refs.pop(id(node), None)
        if name is not None:
            line, col = self._pos(node)
            self.facts.refs.append(RefFact(self._scope, name, line, col))

    def visit_Name(self, node: cst.Name) -> bool:
        if self._pending_refs:
            self._ref_reached(node)
        if id(node) in self.attr_names:  # the ``b`` of ``a.b``: part of a chain
            self.attr_names.discard(id(node))
        elif id(node) not in self.subtracted:
            self._stmt_name(node.value)
        return True

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
        if isinstance(node.operator, cst.Subtract):
            self.subtracted.add(id(node.right))
        return True


def _class_body_names(v: _FactVisitor, node: cst.ClassDef):
    """Annotated attributes and assigned names directly in a class body."""
    attrs: list[tuple[str, str]] = []
    members: list[str] = []
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                attrs.append((small.target.value, v._code(small.annotation.annotation) or ""))
                if small.value is not None:
                    members.append(small.target.value)
            elif isinstance(small, cst.Assign):
                for t in small.targets:
                    if isinstance(t.target, cst.Name):
                        members.append(t.target.value)
    return tuple(attrs), tuple(members)

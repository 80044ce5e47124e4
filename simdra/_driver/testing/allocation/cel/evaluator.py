"""celpy's tree-walking evaluator with the two things Kubernetes' environment adds.

`cel.bind(name, value, expression)` (cel-go's bindings extension, which the DRA
environment loads) and cel-go's wording of a missing map key ("no such key: serial").
Macros (`all`, `exists`, ...) evaluate their body in a sub-evaluator: it is of this
class too, so both hold inside them.

Speed: celpy's parse tree has a node per grammar level (`a == 1` is ten nodes deep) and
its generic rule methods spend most of their time building `typing` subscripts for
`cast()`. `prepare` drops the pass-through levels once per compiled selector, and the
hottest rules (relations, `&&`, `||`, function and method calls, literals) are evaluated
here directly, calling the same functions celpy would; macros, `has()`, field selection,
indexing and the rest are celpy's. A call's error argument is passed on as the call's
result (cel-go's strict functions), where celpy would hand it to the function.
"""

from __future__ import annotations

from typing import Any

import lark
from celpy.evaluation import Activation, CELEvalError, Evaluator

from simdra._driver.testing.allocation.cel import comprehensions
from simdra._driver.testing.allocation.cel.checks import NAMESPACES, Node, plain_ident, token_at
from simdra._driver.testing.allocation.cel.operators import CONVERSIONS

# Rules that only pass their single child's value through when they have one child.
_PASS_THROUGH = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
     "unary", "member"}
)  # fmt: skip
_RELATIONS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "_in_",
}
_LITERALS: dict[tuple[str, str], Any] = {}
_MAX_LITERALS = 4096


def prepare(tree: Node) -> Node:
    """`tree` without its pass-through levels (same value, fewer nodes to visit)."""
    while (
        tree.data in _PASS_THROUGH
        and len(tree.children) == 1
        and isinstance(tree.children[0], lark.Tree)
    ):
        tree = tree.children[0]
    children = [prepare(c) if isinstance(c, lark.Tree) else c for c in tree.children]
    # A plain str rule name: celpy compares it with strings often, and lark's Token.__eq__
    # is Python code.
    return lark.Tree(str(tree.data), children, tree.meta)


class DeviceEvaluator(Evaluator):
    """Evaluates one compiled selector for one device's activation."""

    def sub_evaluator(self, ast: Node) -> Evaluator:
        """A macro body's evaluator (keeps this class's behaviour)."""
        return DeviceEvaluator(ast, activation=self.activation)

    def relation(self, tree: Node) -> Any:
        """`a < b`, `a == b`, `a in b`, ...: the operator function on both values."""
        if len(tree.children) == 1:
            return self.visit(tree.children[0])
        operator_tree, right_tree = tree.children
        function = self.activation.resolve_function(_RELATIONS[str(operator_tree.data)])
        return function(self.visit(operator_tree.children[0]), self.visit(right_tree))

    def conditionaland(self, tree: Node) -> Any:
        """`a && b`, both sides evaluated so that an error on one side can be absorbed."""
        return self._logical(tree, "_&&_")

    def conditionalor(self, tree: Node) -> Any:
        """`a || b`."""
        return self._logical(tree, "_||_")

    def _logical(self, tree: Node, name: str) -> Any:
        if len(tree.children) == 1:
            return self.visit(tree.children[0])
        left, right = (self.visit(child) for child in tree.children)
        return self.activation.resolve_function(name)(left, right)

    def literal(self, tree: Node) -> Any:
        """A literal's value, parsed once (string escapes are not cheap)."""
        token = token_at(tree, 0)
        key = (str(token.type), str(token))
        value = _LITERALS.get(key)
        if value is None:
            value = super().literal(tree)
            if value is not None and not isinstance(value, CELEvalError):
                if len(_LITERALS) >= _MAX_LITERALS:
                    _LITERALS.clear()
                _LITERALS[key] = value
        return value

    def member_dot(self, tree: Node) -> Any:
        """`map.key`: cel-go's "no such key" when the key is missing."""
        value = super().member_dot(tree)
        if isinstance(value, CELEvalError) and str(value.args[0]).startswith(
            "no such member in mapping"
        ):
            return CELEvalError(f"no such key: {tree.children[1]}")
        return value

    def member_dot_arg(self, tree: Node) -> Any:
        """`x.f(args)` calls f(x, args); `cel.bind(x, value, body)`; macros."""
        target, method = tree.children[0], token_at(tree, 1)
        if str(method) == "bind" and plain_ident(target) == "cel" and not self._bound("cel"):
            return self._bind(tree.children[2])
        namespace = plain_ident(target)
        if namespace in NAMESPACES and not self._bound(str(namespace)):
            return self._call(f"{namespace}.{method}", *self._arguments(tree, 2), token=method)
        if str(method) in comprehensions.SHAPES:
            return self._comprehension(tree, str(method))
        return self._call(str(method), self.visit(target), *self._arguments(tree, 2), token=method)

    def _comprehension(self, tree: Node, name: str) -> Any:
        target = self.visit(tree.children[0])
        if isinstance(target, CELEvalError):
            return target
        exprlist = tree.children[2] if len(tree.children) > 2 else None
        arguments: list[Node] = list(exprlist.children) if exprlist is not None else []
        variables, _ = comprehensions.shape(name, len(arguments)) or (1, 1)  # compile checked
        names = [str(plain_ident(argument)) for argument in arguments[:variables]]
        bodies = [self._body(argument, names) for argument in arguments[variables:]]
        return comprehensions.run(name, target, variables, bodies)

    def _body(self, tree: Node, names: list[str]) -> comprehensions.Body:
        """The macro body `tree` as a function of its variables' values."""
        evaluator = self.sub_evaluator(tree)

        def value(values: tuple[Any, ...]) -> Any:
            try:
                return evaluator.evaluate(dict(zip(names, values, strict=True)))
            except CELEvalError as error:  # a body's error is a value, for && / || to absorb
                return error

        return value

    def primary(self, tree: Node) -> Any:
        """`f(args)` for a declared function; `has()`, `dyn()`, names, literals as celpy."""
        child = tree.children[0]
        if child.data == "ident_arg" and str(child.children[0]) not in ("has", "dyn"):
            name = token_at(child, 0)
            return self._call(str(name), *self._arguments(child, 1), token=name)
        return super().primary(tree)

    def _arguments(self, tree: Node, index: int) -> list[Any]:
        exprlist = tree.children[index] if len(tree.children) > index else None
        if exprlist is None:
            return []
        return [self.visit(child) for child in exprlist.children]

    def _call(self, name: str, *values: Any, token: lark.Token) -> Any:
        error = next((v for v in values if isinstance(v, CELEvalError)), None)
        if error is not None:
            return error
        try:
            function = CONVERSIONS.get(name) or self.activation.resolve_function(name)
        except KeyError:
            return CELEvalError(f"undeclared reference to '{name}'", token=token)
        try:
            return function(*values)
        except (TypeError, AttributeError) as problem:  # as celpy words a Python mismatch
            return CELEvalError("no such overload", type(problem), problem.args, token=token)
        except ValueError as problem:
            return CELEvalError(f"{name}: {problem}", type(problem), problem.args, token=token)

    def _bound(self, name: str) -> bool:
        try:
            self.activation.resolve_variable(name)
        except KeyError:
            return False
        return True

    def _bind(self, arguments: Node) -> Any:
        variable_tree, value_tree, body_tree = arguments.children
        variable = plain_ident(variable_tree)
        value = self.visit(value_tree)
        # An error value is bound like any other: it matters only if the body uses it.
        body = self.sub_evaluator(body_tree)
        try:
            return body.evaluate({str(variable): value})
        except CELEvalError as error:
            return error


def evaluate(ast: Node, activation: Activation, device: Any) -> Any:
    """The value of `ast` with `device` bound; raises CELEvalError when it is an error."""
    return DeviceEvaluator(ast, activation=activation).evaluate({"device": device})

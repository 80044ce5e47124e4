"""celpy's tree-walking evaluator with the two things Kubernetes' environment adds.

`cel.bind(name, value, expression)` (cel-go's bindings extension, which the DRA
environment loads) and cel-go's wording of a missing map key ("no such key: serial").
Macros (`all`, `exists`, ...) evaluate their body in a sub-evaluator: it is of this
class too, so both hold inside them.
"""

from __future__ import annotations

from typing import Any

import lark
from celpy.evaluation import Activation, CELEvalError, Evaluator

from driver.testing.allocation.cel.checks import plain_ident


class DeviceEvaluator(Evaluator):
    """Evaluates one compiled selector for one device's activation."""

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        """A macro body's evaluator (keeps this class's behaviour)."""
        return DeviceEvaluator(ast, activation=self.activation)

    def member_dot(self, tree: lark.Tree) -> Any:
        """`map.key`: cel-go's "no such key" when the key is missing."""
        value = super().member_dot(tree)
        if isinstance(value, CELEvalError) and str(value.args[0]).startswith(
            "no such member in mapping"
        ):
            return CELEvalError(f"no such key: {tree.children[1]}")
        return value

    def member_dot_arg(self, tree: lark.Tree) -> Any:
        """`cel.bind(x, value, body)`; everything else as celpy does it."""
        target, method = tree.children[0], tree.children[1]
        if str(method) == "bind" and plain_ident(target) == "cel" and not self._bound("cel"):
            return self._bind(tree.children[2])
        return super().member_dot_arg(tree)

    def _bound(self, name: str) -> bool:
        try:
            self.activation.resolve_variable(name)
        except KeyError:
            return False
        return True

    def _bind(self, arguments: lark.Tree) -> Any:
        variable_tree, value_tree, body_tree = arguments.children
        variable = plain_ident(variable_tree)
        value = self.visit(value_tree)
        # An error value is bound like any other: it matters only if the body uses it.
        body = self.sub_evaluator(body_tree)
        try:
            return body.evaluate({str(variable): value})
        except CELEvalError as error:
            return error


def evaluate(ast: lark.Tree, activation: Activation, device: Any) -> Any:
    """The value of `ast` with `device` bound; raises CELEvalError when it is an error."""
    return DeviceEvaluator(ast, activation=activation).evaluate({"device": device})

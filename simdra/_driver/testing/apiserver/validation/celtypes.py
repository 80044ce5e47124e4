"""A static type check of CEL selector expressions in the DRA environment.

The API server compiles each selector with the DRA CEL environment: the only variable is
`device` (fields `driver`, `attributes`, `capacity`, `allowMultipleAllocations`), and the
expression must have type bool (or dyn, known only at run time). A CEL parser alone does
not see `device.colour`, `device.driver == 1` or a selector that yields a string; this
checker does, for the parts of CEL whose types it knows.

It is conservative: whatever it cannot type (unknown functions, comprehensions over dyn,
syntax it does not parse) becomes `dyn`, which is accepted. It only reports what a real
server surely rejects: an undeclared variable, an unknown device field, an operator
applied to two known types that do not fit, and a known non-bool result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from simdra._driver.testing.apiserver.validation.celtype_rules import (
    ANY,
    BOOL,
    BYTES,
    DEVICE,
    DOUBLE,
    DYN,
    FUNCTION_ARGS,
    FUNCTIONS,
    INT,
    LIST,
    MACROS,
    MAP,
    MAP_VALUE,
    METHODS,
    NAMESPACES,
    NULL,
    STRING,
    UINT,
    TypeCheckError,
    arith,
    check_arguments,
    expect_bool,
    known,
    method_arg,
    need,
    overload,
    relate,
    select,
    shown_type,
)

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>[rR]?[bB]?[rR]?("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))
      | (?P<number>0x[0-9a-fA-F]+u?|\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?
                  |\d+[eE][+-]?\d+|\d+u?)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>&&|\|\||==|!=|<=|>=|[<>!?:+\-*/%().,\[\]{}])
    )""",
    re.VERBOSE,
)


class _GiveUp(Exception):
    """Syntax this checker does not follow: the expression counts as dyn."""


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    pos: int


def _tokens(expression: str) -> list[_Tok]:
    out, pos = [], 0
    while expression[pos:].strip():
        match = _TOKEN.match(expression, pos)
        if not match:
            raise _GiveUp
        kind = match.lastgroup or ""
        if kind == "string" and match.group("string").startswith("'''"):
            raise _GiveUp  # triple quotes: not followed here
        out.append(_Tok(kind, match.group(kind), match.start(kind)))
        pos = match.end()
    out.append(_Tok("end", "", len(expression)))
    return out


def _number_type(text: str) -> str:
    if text.endswith("u"):
        return UINT
    if text.startswith("0x"):
        return INT
    return DOUBLE if any(c in text for c in ".eE") else INT


class _Checker:
    """Recursive descent over CEL's grammar computing each subexpression's type."""

    def __init__(self, expression: str) -> None:
        self.toks = _tokens(expression)
        self.i = 0
        self.scope: list[str] = []
        # Where the server locates the expression parsed last (its operator, '.', '[' or
        # '(', else its first token): the place its errors point at.
        self.loc = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def take(self, text: str) -> _Tok | None:
        if self.tok.text == text and self.tok.kind in ("op", "ident"):
            self.i += 1
            return self.toks[self.i - 1]
        return None

    def expect(self, text: str) -> None:
        if not self.take(text):
            raise _GiveUp

    def check(self) -> str:
        result = self.expr()
        if self.tok.kind != "end":
            raise _GiveUp
        return result

    def expr(self) -> str:
        cond = self.or_expr()
        if not (mark := self.take("?")):
            return cond
        need(cond, BOOL, "_?_:_", mark.pos)
        yes = self.expr()
        self.expect(":")
        no = self.expr()
        self.loc = mark.pos
        return yes if yes == no else DYN

    def or_expr(self) -> str:
        return self.logical("||", self.and_expr)

    def and_expr(self) -> str:
        return self.logical("&&", self.relation)

    def logical(self, op: str, operand: Callable[[], str]) -> str:
        """`a && b && ...` (or `||`): every operand must be a bool."""
        left = operand()
        if self.tok.text != op:
            return left
        expect_bool(left, self.loc)
        while mark := self.take(op):
            expect_bool(operand(), self.loc)
            self.loc = mark.pos
        return BOOL

    def relation(self) -> str:
        left = self.additive()
        while self.tok.text in ("==", "!=", "<", "<=", ">", ">=", "in"):
            op = self.tok
            self.i += 1
            right = self.additive()
            left = relate(op.text, left, right, op.pos)
            self.loc = op.pos
        return left

    def additive(self) -> str:
        left = self.multiplicative()
        while self.tok.text in ("+", "-") and self.tok.kind == "op":
            op = self.tok
            self.i += 1
            left = arith(op.text, left, self.multiplicative(), op.pos)
            self.loc = op.pos
        return left

    def multiplicative(self) -> str:
        left = self.unary()
        while self.tok.text in ("*", "/", "%") and self.tok.kind == "op":
            op = self.tok
            self.i += 1
            left = arith(op.text, left, self.unary(), op.pos)
            self.loc = op.pos
        return left

    def unary(self) -> str:
        if op := self.take("!"):
            operand = self.unary()
            need(operand, BOOL, "!_", op.pos)
            self.loc = op.pos
            return BOOL
        if op := self.take("-"):
            operand = self.unary()
            if known(operand) and operand not in (INT, DOUBLE):
                raise overload("-_", [operand], op.pos)
            self.loc = op.pos
            return operand
        return self.member()

    def member(self) -> str:
        current = self.primary()
        anchor = self.loc
        while True:
            if dot := self.take("."):
                name = self.tok
                if name.kind != "ident":
                    raise _GiveUp
                self.i += 1
                if self.tok.text == "(":
                    call = self.tok.pos
                    current = self.method(current, name, anchor)
                    anchor = call
                else:
                    current = select(current, name.text, dot.pos)
                    anchor = dot.pos
            elif bracket := self.take("["):
                anchor = bracket.pos
                self.expr()
                self.expect("]")
                current = MAP_VALUE.get(current, DYN)
            else:
                self.loc = anchor
                return current

    def method(self, target: str, name: _Tok, anchor: int) -> str:
        if name.text in MACROS:
            if target == ANY:
                raise TypeCheckError(
                    f"expression of type '{shown_type(ANY)}' cannot be range of a comprehension "
                    "(must be list, map, or dynamic)",
                    anchor,
                )
            self.macro_args()
            return MACROS[name.text]
        call = self.tok.pos
        args = self.args()
        wanted = method_arg(target, name.text)
        check_arguments(name.text, args, wanted, call, receiver=target)
        if target in (BOOL, INT, UINT, DOUBLE, NULL, DEVICE) or target in MAP_VALUE:
            return DYN  # methods on these are rare and not typed here
        return METHODS.get(target, {}).get(name.text, DYN)

    def macro_args(self) -> None:
        """`(v, predicate)` or `(k, v, predicate)`: the leading names are bound variables."""
        self.expect("(")
        bound = []
        while self.tok.kind == "ident" and self.toks[self.i + 1].text == ",":
            bound.append(self.tok.text)
            self.i += 2
        self.scope += bound
        self.expr()
        del self.scope[len(self.scope) - len(bound) :]
        self.expect(")")

    def args(self) -> list[str]:
        self.expect("(")
        types: list[str] = []
        if not self.take(")"):
            types.append(self.expr())
            while self.take(","):
                types.append(self.expr())
            self.expect(")")
        return types

    def primary(self) -> str:
        tok = self.tok
        kind = self.literal_or_group(tok)
        if tok.text != "(":
            self.loc = tok.pos  # a parenthesized expression keeps its inner location
        if kind is not None:
            return kind
        if tok.kind == "ident":
            self.i += 1
            return self.identifier(tok)
        raise _GiveUp

    def literal_or_group(self, tok: _Tok) -> str | None:
        if tok.kind == "string":
            self.i += 1
            return BYTES if tok.text[:2].lower() in ("b'", 'b"', "rb", "br") else STRING
        if tok.kind == "number":
            self.i += 1
            return _number_type(tok.text)
        if self.take("("):
            inner = self.expr()
            self.expect(")")
            return inner
        if self.take("["):
            self.items("]")
            return LIST
        if self.take("{"):
            self.items("}")
            return MAP
        return None

    def items(self, close: str) -> None:
        while not self.take(close):
            self.expr()
            if self.take(":"):
                self.expr()
            if not self.take(","):
                self.expect(close)
                return

    def identifier(self, tok: _Tok) -> str:
        if tok.text in ("true", "false"):
            return BOOL
        if tok.text == "null":
            return NULL
        if tok.text == "device" or tok.text in self.scope:
            return DEVICE if tok.text == "device" else DYN
        if self.tok.text == "(":
            call = self.tok.pos
            args = self.args()
            self.loc = call
            if tok.text == "has":
                return BOOL
            check_arguments(tok.text, args, FUNCTION_ARGS.get(tok.text), call)
            return FUNCTIONS.get(tok.text, DYN)
        ahead = self.toks[self.i : self.i + 3]
        dotted = [t.text for t in ahead][::2] == [".", "("] and ahead[1].kind == "ident"
        if dotted and tok.text in NAMESPACES:
            return self.namespaced_call()  # cel.bind(...), strings.quote(...), ...
        raise TypeCheckError(f"undeclared reference to '{tok.text}' (in container '')", tok.pos)

    def namespaced_call(self) -> str:
        self.i += 2  # the '.' and the function name
        self.expect("(")
        bound = []
        if self.tok.kind == "ident" and self.toks[self.i + 1].text == ",":
            bound.append(self.tok.text)  # cel.bind(name, init, body)
            self.i += 2
        self.scope += bound
        while not self.take(")"):
            self.expr()
            if not self.take(","):
                self.expect(")")
                break
        del self.scope[len(self.scope) - len(bound) :]
        return DYN


def result_type(expression: str) -> str:
    """The static type of `expression` (`dyn` when not known); TypeCheckError when the
    expression surely fails the type check."""
    try:
        return _Checker(expression).check()
    except (_GiveUp, IndexError):
        return DYN

# -*- test-case-name: tests.api.crdschema.test_cel -*-
"""
CEL validation rules (C{x-kubernetes-validations}) of custom resource
schemas, evaluated with cel-python (module C{celpy}).

Each rule is compiled once, when its schema is, and checked before a
definition is accepted: it must parse, name only C{self}, C{oldSelf} and
its macros' variables, and call only functions this server evaluates (CEL's
standard ones, the comprehension macros, and the Kubernetes string and list
extensions written below).  Anything else (C{quantity()}, C{url()},
C{ip()}, C{format.named()}, optionals, ...) is refused by name: a rule that
is not run must never be accepted.  Nested comprehensions are refused too,
as their cost is quadratic in a list's length and cannot be bounded here
as upstream's cost estimator does.

Evaluation is bounded by the caller's budget (L{Rule.cost}), like
upstream's runtime cost budget.  A rule that mentions C{oldSelf} is a
transition rule: it runs on updates only, where an old value correlates
(same property, same map key, same key of a C{map} list).
"""

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError
from lark import Token, Tree

from orchd.api.crdschema.compiled import _MISSING
from orchd.api.errors import DUPLICATE, FORBIDDEN, INVALID, REQUIRED, FieldError

#: Longest rule or message expression accepted (upstream bounds them by cost).
MAX_RULE_LENGTH = 16 * 1024

#: Deepest parse tree evaluated: celpy's evaluator recurses once per level,
#: and Python's recursion limit must stay far away.
MAX_TREE_DEPTH = 400

_REASONS = {
    "FieldValueInvalid": INVALID,
    "FieldValueForbidden": FORBIDDEN,
    "FieldValueRequired": REQUIRED,
    "FieldValueDuplicate": DUPLICATE,
}
_MACROS = frozenset(("all", "exists", "exists_one", "map", "filter"))
_TYPE_NAMES = frozenset(("int", "uint", "double", "bool", "string", "bytes", "list", "map",
                         "null_type", "type", "duration", "timestamp"))


# -- Kubernetes CEL extensions ------------------------------------------------

def _fail(message):
    return CELEvalError(message, ValueError, None)


def _string_or_list(name, on_string, on_list):
    def dispatch(target, *args):
        if isinstance(target, celtypes.StringType):
            return on_string(target, *args)
        if isinstance(target, celtypes.ListType):
            return on_list(target, *args)
        return _fail(f"no such overload: {name}")
    return dispatch


def _index_of_string(text, part, offset=0):
    offset = int(offset)
    if offset < 0 or offset > len(text):
        return _fail(f"index out of range: {offset}")
    return celtypes.IntType(text.find(part, offset))


def _last_index_of_string(text, part, offset=None):
    end = len(text) if offset is None else int(offset) + len(part)
    return celtypes.IntType(text.rfind(part, 0, end))


def _index_of_list(items, value):
    for position, item in enumerate(items):
        if item == value:
            return celtypes.IntType(position)
    return celtypes.IntType(-1)


def _last_index_of_list(items, value):
    for position in range(len(items) - 1, -1, -1):
        if items[position] == value:
            return celtypes.IntType(position)
    return celtypes.IntType(-1)


def _substring(text, start, end=None):
    start = int(start)
    end = len(text) if end is None else int(end)
    if not 0 <= start <= end <= len(text):
        return _fail(f"index out of range: {start}, {end}")
    return celtypes.StringType(text[start:end])


def _char_at(text, position):
    position = int(position)
    if not 0 <= position <= len(text):
        return _fail(f"index out of range: {position}")
    return celtypes.StringType(text[position:position + 1])


def _split(text, separator, limit=None):
    limit = -1 if limit is None else int(limit)
    if limit == 0:
        return celtypes.ListType([])
    if separator == "":
        parts = list(text)
        if limit > 0 and len(parts) > limit:
            parts = parts[:limit - 1] + ["".join(parts[limit - 1:])]
        return celtypes.ListType([celtypes.StringType(p) for p in parts])
    parts = text.split(separator, limit - 1) if limit > 0 else text.split(separator)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _replace(text, old, new, limit=None):
    limit = -1 if limit is None else int(limit)
    return celtypes.StringType(text.replace(old, new, limit))


def _join(items, separator=""):
    if not all(isinstance(item, celtypes.StringType) for item in items):
        return _fail("join: list must hold strings")
    return celtypes.StringType(str(separator).join(items))


def _is_sorted(items):
    try:
        return celtypes.BoolType(all(items[i] <= items[i + 1] for i in range(len(items) - 1)))
    except TypeError:
        return _fail("isSorted: items are not comparable")


def _sum(items):
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def _extreme(pick):
    def extreme(items):
        if not items:
            return _fail("min/max of an empty list")
        try:
            return pick(items)
        except TypeError:
            return _fail("items are not comparable")
    return extreme


#: The Kubernetes CEL library functions this server adds to cel-python's.
EXTENSIONS = {
    "lowerAscii": lambda s: celtypes.StringType(
        "".join(c.lower() if c.isascii() else c for c in s)),
    "upperAscii": lambda s: celtypes.StringType(
        "".join(c.upper() if c.isascii() else c for c in s)),
    "trim": lambda s: celtypes.StringType(s.strip()),
    "split": _split,
    "replace": _replace,
    "join": _join,
    "substring": _substring,
    "charAt": _char_at,
    "indexOf": _string_or_list("indexOf", _index_of_string, _index_of_list),
    "lastIndexOf": _string_or_list("lastIndexOf", _last_index_of_string, _last_index_of_list),
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _extreme(min),
    "max": _extreme(max),
}

def _guarded(name, function):
    """An extension whose Python failures become CEL evaluation errors naming it."""
    def guarded(*args):
        try:
            return function(*args)
        except Exception as failure:  # wrong argument types or counts from a rule
            return _fail(f"{name}: {failure}")
    return guarded


EXTENSIONS = {name: _guarded(name, function) for name, function in EXTENSIONS.items()}

_ENV = celpy.Environment()
_KNOWN_FUNCTIONS = (frozenset(celpy.evaluation.base_functions) | frozenset(EXTENSIONS)
                    | _MACROS | {"has"})


class RuleError(ValueError):
    """A rule that does not compile, or uses what this server cannot evaluate."""


def _walk(tree):
    """
    The names a parsed expression calls and references, and its deepest
    comprehension nesting (no recursion: the tree's depth follows the text).
    """
    functions, identifiers, variables = set(), set(), set()
    deepest = 0
    pending = [(tree, 0, 0)]
    while pending:
        node, depth, height = pending.pop()
        if not isinstance(node, Tree):
            continue
        if height > MAX_TREE_DEPTH:
            raise RuleError("compilation failed: expression nested too deeply")
        data = node.data
        children = node.children
        if data == "member_dot_arg":
            name = str(children[1])
            functions.add(name)
            if name in _MACROS or name == "has":
                if name in _MACROS:
                    depth += 1
                    deepest = max(deepest, depth)
                    variable = _macro_variable(children[2] if len(children) > 2 else None)
                    if variable is not None:
                        variables.add(variable)
        elif data == "ident_arg":
            functions.add(str(children[0]))
        elif data == "dot_ident_arg":
            functions.add(str(children[0]))
        elif data == "ident":
            identifiers.add(str(children[0]))
        for item in children:
            if isinstance(item, Tree):
                pending.append((item, depth, height + 1))
    return functions, identifiers - variables, deepest


def _macro_variable(exprlist):
    """The iteration variable of C{list.all(x, ...)}: its first argument, a bare identifier."""
    if not isinstance(exprlist, Tree) or not exprlist.children:
        return None
    first = exprlist.children[0]
    while isinstance(first, Tree) and len(first.children) == 1 and first.data != "ident":
        first = first.children[0]
    if isinstance(first, Tree) and first.data == "ident" and isinstance(first.children[0], Token):
        return str(first.children[0])
    return None


def compile_expression(text):
    """
    The compiled program of C{text} and whether it reads C{oldSelf}.

    @raise RuleError: it does not parse, or uses what this server cannot evaluate.
    """
    if len(text) > MAX_RULE_LENGTH:
        raise RuleError(f"must be at most {MAX_RULE_LENGTH} characters")
    try:
        tree = _ENV.compile(text)
    except RecursionError:
        raise RuleError("compilation failed: expression nested too deeply") from None
    except Exception as failure:  # celpy.CELParseError and lark's own errors
        line, column = getattr(failure, "line", None), getattr(failure, "column", None)
        where = f"{line or 1}:{column or 0}"
        raise RuleError(f"compilation failed: ERROR: <input>:{where}: Syntax error") from None
    functions, identifiers, nesting = _walk(tree)
    unsupported = sorted(functions - _KNOWN_FUNCTIONS)
    if unsupported:
        named = ", ".join(f"'{name}'" for name in unsupported)
        verb = "function {} is" if len(unsupported) == 1 else "functions {} are"
        raise RuleError(f"compilation failed: {verb.format(named)} not supported by this server")
    undeclared = sorted(identifiers - {"self", "oldSelf"} - _TYPE_NAMES)
    if undeclared:
        raise RuleError(f"compilation failed: undeclared reference to '{undeclared[0]}'")
    if nesting > 1:
        raise RuleError("estimated rule cost exceeds budget: nested comprehensions "
                        "(all, exists, exists_one, map, filter) are not supported by this server")
    program = _ENV.program(tree, functions=EXTENSIONS)
    return program, "oldSelf" in identifiers


def check_rules(schema, rules, path, uncorrelatable=None):
    """
    The field errors of one C{x-kubernetes-validations} list at schema C{path}.

    Each refusal names the rule and what in it is unsupported.

    @param uncorrelatable: the schema path of the list items above C{path}
        whose old values cannot be found (transition rules are refused there).
    """
    errors = []
    if not isinstance(rules, list):
        return [FieldError.invalid(f"{path}.x-kubernetes-validations", rules, "must be a list")]
    for position, rule in enumerate(rules):
        where = f"{path}.x-kubernetes-validations[{position}]"
        if not isinstance(rule, dict):
            errors.append(FieldError.invalid(where, rule, "must be an object"))
            continue
        text = rule.get("rule")
        if not isinstance(text, str) or not text.strip():
            errors.append(FieldError.required(f"{where}.rule", ""))
            continue
        try:
            _, transition = compile_expression(text)
        except RuleError as failure:
            errors.append(FieldError.invalid(f"{where}.rule", text, f"{failure} (rule: {text})"))
            continue
        if transition and uncorrelatable is not None:
            errors.append(FieldError.invalid(
                f"{where}.rule", text,
                f"oldSelf cannot be used on the uncorrelatable portion of the schema within {uncorrelatable}"))
        if rule.get("optionalOldSelf") is True:
            errors.append(FieldError.invalid(
                f"{where}.optionalOldSelf", True,
                f"optional oldSelf (CEL optional types) is not supported by this server (rule: {text})"))
        elif rule.get("optionalOldSelf") is not None and not transition:
            errors.append(FieldError.forbidden(
                f"{where}.optionalOldSelf", "may not be set if oldSelf is not used in rule"))
        expression = rule.get("messageExpression")
        if expression is not None:
            if not isinstance(expression, str) or not expression.strip():
                errors.append(FieldError.required(f"{where}.messageExpression",
                                                  "messageExpression must be non-empty if specified"))
            else:
                try:
                    compile_expression(expression)
                except RuleError as failure:
                    errors.append(FieldError.invalid(f"{where}.messageExpression", expression,
                                                     f"messageExpression {failure}"))
        message = rule.get("message")
        if message is not None and (not isinstance(message, str) or not message.strip()):
            errors.append(FieldError.required(f"{where}.message", "message must be non-empty if specified"))
        elif isinstance(message, str) and "\n" in message:
            errors.append(FieldError.invalid(f"{where}.message", message,
                                             "message must not contain line breaks"))
        reason = rule.get("reason")
        if reason is not None and reason not in _REASONS:
            errors.append(FieldError.not_supported(f"{where}.reason", reason, list(_REASONS)))
        field_path = rule.get("fieldPath")
        if field_path is not None and _resolve(schema, field_path) is None:
            errors.append(FieldError.invalid(
                f"{where}.fieldPath", field_path,
                "fieldPath must be a valid path: it must name a field of this schema, "
                "as .name or ['name'] steps"))
    return errors


def _resolve(schema, field_path):
    """The schema C{fieldPath} names below C{schema} (C{.a.b}, C{['a']}), or None."""
    if not isinstance(field_path, str) or not field_path:
        return None
    node, text = schema, field_path
    while text:
        if text.startswith("."):
            text = text[1:]
            end = min([i for i in (text.find("."), text.find("[")) if i >= 0] or [len(text)])
            name, text = text[:end], text[end:]
        elif text.startswith("['") and "']" in text:
            name, _, text = text[2:].partition("']")
        else:
            return None
        if not name or not isinstance(node, dict):
            return None
        properties = node.get("properties")
        if isinstance(properties, dict) and name in properties:
            node = properties[name]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return node


def _field_path_suffix(field_path):
    """C{.a['b']} as a field path suffix: C{.a.b}."""
    out, text = [], field_path
    while text:
        if text.startswith("."):
            text = text[1:]
            end = min([i for i in (text.find("."), text.find("[")) if i >= 0] or [len(text)])
            out.append(text[:end])
            text = text[end:]
        else:
            name, _, text = text[2:].partition("']")
            out.append(name)
    return out


class Rule:
    """One compiled rule of a schema node."""

    __slots__ = ("text", "program", "transition", "message", "message_program", "error_type",
                 "field_path")

    def __init__(self, rule):
        self.text = rule["rule"]
        self.program, self.transition = compile_expression(self.text)
        self.message = rule.get("message") or None
        expression = rule.get("messageExpression")
        self.message_program = compile_expression(expression)[0] if expression else None
        self.error_type = _REASONS.get(rule.get("reason") or "FieldValueInvalid", INVALID)
        field_path = rule.get("fieldPath")
        self.field_path = _field_path_suffix(field_path) if field_path else ()

    @staticmethod
    def cost(value):
        """What one evaluation costs from the budget: a base plus the value's size."""
        kind = type(value)
        if kind is not dict and kind is not list:
            return 100
        size, pending = 100, [value]
        while pending:
            item = pending.pop()
            size += len(item)
            for sub in (item.values() if type(item) is dict else item):
                if type(sub) is dict or type(sub) is list:
                    pending.append(sub)
        return size

    def check(self, value, old, path, node):
        """The field error of this rule on C{value}, or None when it holds (or does not apply)."""
        if self.transition and old is _MISSING:
            return None
        try:
            activation = {"self": to_cel(value, node)}
            if self.transition:
                activation["oldSelf"] = to_cel(old, node)
            result = self.program.evaluate(activation)
        except CELEvalError as failure:
            return FieldError.invalid(_where(path, self.field_path), node.type or "",
                                      f"{_eval_text(failure)} evaluating rule: {self._rule_text()}")
        except Exception as failure:  # a bug in an extension or in celpy: still a 422
            return FieldError.invalid(_where(path, self.field_path), node.type or "",
                                      f"{failure} evaluating rule: {self._rule_text()}")
        if isinstance(result, CELEvalError):
            return FieldError.invalid(_where(path, self.field_path), node.type or "",
                                      f"{_eval_text(result)} evaluating rule: {self._rule_text()}")
        if result is True or (isinstance(result, celtypes.BoolType) and bool(result)):
            return None
        if not isinstance(result, (bool, celtypes.BoolType)):
            return FieldError.invalid(_where(path, self.field_path), node.type or "",
                                      f"rule did not evaluate to a bool: {self.text}")
        detail = self._message(activation)
        where = _where(path, self.field_path)
        if self.error_type == FORBIDDEN:
            return FieldError.forbidden(where, detail)
        if self.error_type == REQUIRED:
            return FieldError.required(where, detail)
        if self.error_type == DUPLICATE:
            return FieldError.duplicate(where, node.type or "")
        return FieldError.invalid(where, node.type or "", detail)

    def _rule_text(self):
        """Upstream's ruleErrorString: the message when there is one, else the rule."""
        return (self.message or self.text).strip()

    def _message(self, activation):
        if self.message_program is not None:
            try:
                text = self.message_program.evaluate(activation)
            except Exception:  # upstream falls back to message when the expression fails
                text = None
            if isinstance(text, str) and text.strip() and "\n" not in text:
                return str(text)
        if self.message:
            return self.message
        return f"failed rule: {self.text.strip()}"


#: CEL's reserved words: a property so named is C{__name__} in rules.
_RESERVED = frozenset((
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
    "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"))
_ESCAPES = {}


def escape(name):
    """
    A property name as rules spell it (upstream's escaping): C{__} is
    C{__underscores__}, C{.} C{__dot__}, C{-} C{__dash__}, C{/} C{__slash__},
    and a reserved word C{w} is C{__w__}.
    """
    escaped = _ESCAPES.get(name)
    if escaped is None:
        if name in _RESERVED:
            escaped = f"__{name}__"
        else:
            escaped = (name.replace("__", "__underscores__").replace(".", "__dot__")
                       .replace("-", "__dash__").replace("/", "__slash__"))
        if len(_ESCAPES) < 10000:
            _ESCAPES[name] = escaped
    return escaped


def to_cel(value, node):
    """
    C{value} as a CEL value, with its schema's property names escaped as
    rules spell them (map keys from additionalProperties stay as they are).
    """
    kind = type(value)
    if kind is dict:
        properties = node.properties if node is not None else None
        out = {}
        for name, item in value.items():
            sub = None
            key = name
            if properties is not None and name in properties:
                sub = properties[name]
                key = escape(name)
            elif node is not None:
                sub = node.additional
            out[celtypes.StringType(key)] = to_cel(item, sub)
        return celtypes.MapType(out)
    if kind is list:
        items = node.items if node is not None else None
        return celtypes.ListType([to_cel(item, items) for item in value])
    if kind is str:
        return celtypes.StringType(value)
    if kind is bool:
        return celtypes.BoolType(value)
    if kind is int:
        return celtypes.IntType(value)
    if kind is float:
        return celtypes.DoubleType(value)
    return None


def _where(path, suffix):
    for name in suffix:
        path = f"{path}.{name}" if path else name
    return path or "<nil>"


def _eval_text(failure):
    text = failure.args[0] if failure.args else str(failure)
    text = str(text)
    if text.startswith("no such member in mapping: "):
        return "no such key: " + text[len("no such member in mapping: "):].strip("'")
    return text


def compile_rules(node, rules):
    """The compiled rules of a schema node (its schema already passed L{check_rules})."""
    return tuple(Rule(rule) for rule in rules if isinstance(rule, dict) and rule.get("rule"))


def correlate_list(node, value, old):
    """
    The old item of each new item of a list, for transition rules: items of
    a C{map} list correlate by their keys; other lists do not correlate.
    """
    if node.list_type != "map" or type(old) is not list or not node.list_map_keys:
        return None
    keys = node.list_map_keys
    before = {}
    for item in old:
        if type(item) is dict:
            before[tuple(_hashable(item.get(k)) for k in keys)] = item
    out = []
    for item in value:
        if type(item) is dict:
            out.append(before.get(tuple(_hashable(item.get(k)) for k in keys), _MISSING))
        else:
            out.append(_MISSING)
    return out


def _hashable(value):
    return value if type(value) in (str, int, float, bool, type(None)) else repr(value)

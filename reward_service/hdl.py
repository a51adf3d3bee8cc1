"""Light source inspection of Verilog/SystemVerilog text: module names, top module, instance
names, VHDL detection. Regex-based on comment-stripped text; enough for choosing a top module
and checking the DUT instance name, not a parser."""

from __future__ import annotations

import re

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
#: A Verilog string literal (backslash escapes included).
STRING_LITERAL = re.compile(r'"(?:\\.|[^"\\])*"')
_STRING_OR_COMMENT = re.compile(rf"(?P<s>{STRING_LITERAL.pattern})|{_COMMENT.pattern}", re.S)
_MODULE = re.compile(r"^\s*(?:module|program)\s+(?:automatic\s+|static\s+)?([A-Za-z_]\w*)", re.M)
_WORD = re.compile(r"[A-Za-z_$][\w$]*")
_VHDL = re.compile(r"^\s*(entity\s+\w+\s+is|architecture\s+\w+\s+of\s+\w+\s+is)\b", re.I | re.M)
#: Verilog headers: `include'd, or compiled as sources when nothing includes them (cocotb flow).
HEADER_SUFFIXES = (".vh", ".svh", ".inc")
HDL_SUFFIXES = (".v", ".sv", ".vams", ".svi") + HEADER_SUFFIXES
VHDL_SUFFIXES = (".vhd", ".vhdl")


def strip_comments(text: str) -> str:
    """Text without // and /* */ comments and string literals."""
    return _COMMENT.sub(" ", STRING_LITERAL.sub('""', text))


def strip_comments_only(text: str) -> str:
    """Text without // and /* */ comments; string literals kept as they are."""
    return _STRING_OR_COMMENT.sub(lambda m: m.group("s") or " ", text)


def module_names(text: str) -> list[str]:
    """Names of the modules (and programs) declared in ``text``, in order."""
    return _MODULE.findall(strip_comments(text))


def is_vhdl(name: str, text: str) -> bool:
    """Whether a file is VHDL, by suffix (.vhd/.vhdl) or by an entity/architecture header."""
    return name.lower().endswith(VHDL_SUFFIXES) or bool(_VHDL.search(strip_comments(text)))


def top_modules(texts: list[str]) -> list[str]:
    """Modules declared in ``texts`` that none of them instantiates (candidate tops), in order."""
    declared = [name for text in texts for name in module_names(text)]
    return [name for name in declared if not any(instance_names(text, name) for text in texts)]


def choose_top(stimulus_texts: list[str], design_modules: set[str]) -> str | None:
    """The testbench top: a stimulus module nobody instantiates; prefers names like tb*/test*."""
    tops = [t for t in top_modules(stimulus_texts) if t not in design_modules]
    if not tops:
        return None
    for name in tops:
        if re.match(r"(?i)^(tb|test)|_tb$|_test$|bench", name):
            return name
    return tops[0]


def instantiates(text: str, module: str | None, instance: str) -> bool:
    """Whether ``text`` holds an instance named ``instance`` (of ``module`` when given):
    ``module [#(...)] instance (`` allowing parameter overrides and arrays."""
    clean = strip_comments(text)
    mod = re.escape(module) if module else r"[A-Za-z_]\w*"
    pattern = rf"\b{mod}\s*(?:#\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\s*)?\b{re.escape(instance)}\s*(?:\[[^\]]*\]\s*)*\("
    return re.search(pattern, clean) is not None


def instance_names(text: str, module: str) -> list[str]:
    """Instance names of ``module`` in ``text``."""
    clean = strip_comments(text)
    pattern = rf"\b{re.escape(module)}\s*(?:#\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\s*)?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*\("
    return re.findall(pattern, clean)


_COVERGROUP = re.compile(r"\bcovergroup\s+([A-Za-z_]\w*)")


def covergroups(text: str) -> list[str]:
    """Names of the SystemVerilog covergroups declared in ``text``, in order (comments and
    strings ignored)."""
    return _COVERGROUP.findall(strip_comments(text))

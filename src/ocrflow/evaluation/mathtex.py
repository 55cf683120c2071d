"""Offline comparison of LaTeX formulas for ``math`` tests.

The reference benchmark renders both formulas with KaTeX in a headless browser and passes
when the reference's MathML is contained in the hypothesis's (or the rendered glyphs have
the same neighbours). We do not ship a browser in the evaluation path, so we compare
*canonical token sequences*: LaTeX is tokenised, notation that renders the same is folded
(spacing and sizing commands dropped, ``\\dfrac`` read as ``\\frac``, ``\\le`` as ``\\leq``,
Greek/operator commands as their Unicode glyphs, braces around a single token dropped), and
the test passes when the reference's tokens occur contiguously in a hypothesis's. This is
exact on formulas written the same way and on the usual notational variants; it cannot see
that two genuinely different spellings render identically (e.g. ``x^{(2)}`` vs a Unicode
superscript) — docs/eval.md lists the difference.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\S", re.DOTALL)


# Commands that change only spacing, size or style: KaTeX's MathML keeps the symbols alone.
def _split(words: str) -> list[str]:
    return words.split()


_DROP = frozenset(
    _split(
        r"\left \right \big \Big \bigg \Bigg \bigl \bigr \Bigl \Bigr \biggl \biggr \Biggl \Biggr"
        r" \displaystyle \textstyle \scriptstyle \, \; \: \! \quad \qquad \  \limits \nolimits"
        r" ~ \middle"
        # Font commands: the reference compares rendered glyphs, which carry no font.
        r" \mathcal \mathrm \mathbf \mathit \mathbb \mathfrak \mathsf \mathtt \mathscr"
        r" \boldsymbol \bm \text \textrm \textbf \textit \textnormal \operatorname"
    )
) | {"\\ "}

_ALIASES = {
    r"\dfrac": r"\frac",
    r"\tfrac": r"\frac",
    r"\le": "≤",
    r"\leq": "≤",
    r"\ge": "≥",
    r"\geq": "≥",
    r"\ne": "≠",
    r"\neq": "≠",
    r"\to": "→",
    r"\rightarrow": "→",
    r"\leftarrow": "←",
    r"\gets": "←",
    r"\times": "×",
    r"\cdot": "⋅",
    r"\pm": "±",
    r"\mp": "∓",
    r"\infty": "∞",
    r"\partial": "∂",
    r"\nabla": "∇",
    r"\sum": "∑",
    r"\prod": "∏",
    r"\int": "∫",
    r"\approx": "≈",
    r"\equiv": "≡",
    r"\sim": "∼",
    r"\in": "∈",
    r"\subset": "⊂",
    r"\cup": "∪",
    r"\cap": "∩",
    r"\ldots": "…",
    r"\dots": "…",
    r"\cdots": "⋯",
    r"\lbrace": r"\{",
    r"\rbrace": r"\}",
    r"\vert": "|",
    r"\lvert": "|",
    r"\rvert": "|",
    r"\mid": "|",
    r"\prime": "'",
    r"\lt": "<",
    r"\gt": ">",
}
_GREEK = _split(
    "alpha α beta β gamma γ delta δ epsilon ϵ varepsilon ε zeta ζ eta η theta θ vartheta ϑ "
    "iota ι kappa κ lambda λ mu μ nu ν xi ξ pi π varpi ϖ rho ρ varrho ϱ sigma σ varsigma ς "
    "tau τ upsilon υ phi ϕ varphi φ chi χ psi ψ omega ω Gamma Γ Delta Δ Theta Θ Lambda Λ "
    "Xi Ξ Pi Π Sigma Σ Upsilon Υ Phi Φ Psi Ψ Omega Ω"
)
_GLYPHS = {"\\" + name: glyph for name, glyph in zip(_GREEK[::2], _GREEK[1::2], strict=True)}


def _fold(token: str) -> str:
    token = _ALIASES.get(token, token)
    return _GLYPHS.get(token, token)


def _unbrace(tokens: list[str]) -> list[str]:
    """Drop braces that enclose exactly one token (``x^{2}`` renders as ``x^2``)."""
    out: list[str] = []
    for token in tokens:
        out.append(token)
        if token == "}" and len(out) >= 3 and out[-3] == "{":
            out[-3:] = [out[-2]]
    return out


def _primes(tokens: list[str]) -> list[str]:
    """``g'`` is KaTeX shorthand for ``g^{\\prime}``: spell the superscript out."""
    out: list[str] = []
    for token in tokens:
        if token == "'" and (not out or out[-1] != "^"):
            out.append("^")
        out.append(token)
    return out


def canonical_tokens(latex: str) -> list[str]:
    """LaTeX as a list of canonical tokens (see the module docstring)."""
    raw = [_fold(t) for t in _TOKEN.findall(latex) if t not in _DROP]
    return _primes(_unbrace(raw))


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def same_formula(reference: str, hypothesis: str) -> bool:
    """Whether ``hypothesis`` renders ``reference`` (tokens contained, after folding)."""
    ref = canonical_tokens(reference)
    return bool(ref) and _contains(canonical_tokens(hypothesis), ref)


_DELIMITERS = (
    (r"\\\((.+?)\\\)", False),
    (r"\\\[(.+?)\\\]", False),
    (r"\$\$(.+?)\$\$", True),
    (r"\$(.+?)\$", True),
)


def extract_formulas(text: str, *, dollars: bool = True) -> list[str]:
    """Formulas in ``\\(..\\)``, ``\\[..\\]`` and (unless ``dollars`` is False) ``$$..$$``,
    ``$..$``, each delimiter kind removed before the next is searched, as the reference does.
    """
    found: list[str] = []
    for pattern, is_dollar in _DELIMITERS:
        if is_dollar and not dollars:
            continue
        found.extend(m.strip() for m in re.findall(pattern, text, flags=re.DOTALL))
        text = re.sub(pattern, "", text, flags=re.DOTALL)
    return found

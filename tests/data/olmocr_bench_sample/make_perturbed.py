"""Write perturbed/: a seeded, damaged copy of outputs/ (reversed paragraphs, typos, half
of the pipe tables as HTML, \\frac as \\dfrac, \\left( as a plain parenthesis), so that the
agreement test also sees failing verdicts. ``python make_perturbed.py``."""

from __future__ import annotations

import random
from pathlib import Path

HERE = Path(__file__).resolve().parent


def pipe_to_html(block: list[str]) -> list[str]:
    rows = [r.strip().strip("|").split("|") for r in block if not set(r.strip()) <= set("|-: ")]
    head = "".join(f"<th>{c.strip()}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{c.strip()}</td>" for c in r) + "</tr>" for r in rows[1:])
    return [f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"]


def typos(text: str, rate: float, rng: random.Random) -> str:
    out = []
    for ch in text:
        if ch.isalnum() and rng.random() < rate:
            kind = rng.choice("sdi")
            if kind == "s":
                out.append(rng.choice("abcdefghijklmnopqrstuvwxyz"))
            elif kind == "i":
                out.append(ch + rng.choice("xyz"))
        else:
            out.append(ch)
    return "".join(out)


def perturb(text: str, rng: random.Random) -> str:
    out: list[str] = []
    block: list[str] = []
    for line in [*text.split("\n"), ""]:
        if "|" in line:
            block.append(line)
            continue
        if len(block) >= 2 and rng.random() < 0.5:
            block = pipe_to_html(block)
        out += [*block, line]
        block = []
    paras = "\n".join(out).split("\n\n")
    if rng.random() < 0.5:
        paras = paras[::-1]
    paras = [
        p if p.startswith("<table") else typos(p, rng.choice([0.0, 0.01, 0.03]), rng) for p in paras
    ]
    text = "\n\n".join(paras)
    return text.replace(r"\frac", r"\dfrac").replace(r"\left(", "(").replace(r"\right)", ")")


def main() -> None:
    rng = random.Random(11)
    for src in sorted((HERE / "outputs").rglob("*.md")):
        dst = HERE / "perturbed" / src.relative_to(HERE / "outputs")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(perturb(src.read_text(encoding="utf-8"), rng), encoding="utf-8")


if __name__ == "__main__":
    main()

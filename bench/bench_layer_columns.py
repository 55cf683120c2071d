"""Does ``pdftotext`` read a searchable PDF's two columns as the Markdown does? Gutter by gutter.

    .venv/bin/python bench/bench_layer_columns.py [--gutters 8,10,12,14,18,24] [--engine ...]

The issue's acceptance asks that ``pdftotext`` of every PDF written gives a CER within 1.02x
of the Markdown's. Text extractors built like poppler's rebuild lines and columns from the
words' positions and font sizes, so a narrow gutter can make them read two columns across,
line by line, whatever the Markdown says. This measures where that starts.

Pages (made here, nothing downloaded): one 300-dpi letter page a gutter, two columns of
10-pt serif on 12-pt leading, paragraphs 6 pt apart, the columns ``--gutters`` points apart
(LaTeX's two-column default is 10 pt). Its truth is the left column, then the right. One
``ocrflow run --format pdf,markdown`` reads them all; for each page it prints the
Markdown's CER and the text layer's (``pdftotext``), and their ratio (goal: at most 1.02).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from ocrflow.evaluation.metrics import score_text

DPI = 300
FONT_FILE = "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf"
#: The words the columns are made of (a common-word list: any text would do).
WORDS = (
    "the of and to in is that for it as was with be by on not this are or from at which but "
    "have an they were there been one all would when if so what more out up into can some "
    "them other than then only its time could these two may first new any now such like our "
    "over even most made after also did many before must through back years where much way "
    "well down should because each just those people how too little state good very make "
    "world still see own work long get here between both life being under never day same "
    "another know while last might great old year off come since against go came right used"
)


def pt(points: float) -> int:
    """Points at the page's resolution."""
    return round(points * DPI / 72)


def two_columns(gutter_pt: float, path: Path, seed: int) -> str:
    """Write a two-column scan with a gutter of ``gutter_pt`` to ``path``; return its truth."""
    rng, vocabulary = random.Random(seed), WORDS.split()
    width, height, margin = pt(612), pt(792), pt(54)
    try:
        font: ImageFont.FreeTypeFont | ImageFont.ImageFont = ImageFont.truetype(FONT_FILE, pt(10))
    except OSError:  # no Liberation fonts (Debian's fonts-liberation): Pillow's own
        font = ImageFont.load_default(size=pt(10))
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    column = (width - 2 * margin - pt(gutter_pt)) // 2
    columns = []
    for index in range(2):
        x, y, lines = margin + index * (column + pt(gutter_pt)), margin, []
        while y < height - margin - pt(40):
            words = [rng.choice(vocabulary) for _ in range(rng.randint(40, 90))]
            line = ""
            for word in [*words[:-1], words[-1] + "."]:
                trial = f"{line} {word}".strip()
                if draw.textlength(trial, font=font) > column:
                    lines.append((x, y, line))
                    y, line = y + pt(12), word
                else:
                    line = trial
            lines.append((x, y, line))
            y += pt(12) + pt(6)
        kept = [(lx, ly, text) for lx, ly, text in lines if ly <= height - margin - pt(12)]
        for lx, ly, text in kept:
            draw.text((lx, ly), text, font=font, fill=0)
        columns.append("\n".join(text for _, _, text in kept))
    page.save(path, "PDF", resolution=DPI)
    return "\n\n".join(columns)


def pdftotext(pdf: Path) -> str:
    """The PDF's text as poppler reads it."""
    done = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True)
    return done.stdout.replace("\f", "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gutters", default="8,10,12,14,18,24", help="points, comma-separated")
    parser.add_argument("--engine", default="embedded", help="ocrflow run --engine")
    parser.add_argument("--ocrflow", default=str(Path(sys.executable).with_name("ocrflow")))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    gutters = [float(g) for g in args.gutters.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        inputs, out = Path(tmp) / "in", Path(tmp) / "out"
        inputs.mkdir()
        truths = {
            f"gutter{g:g}.pdf": two_columns(g, inputs / f"gutter{g:g}.pdf", args.seed)
            for g in gutters
        }
        run = [args.ocrflow, "run", str(inputs), "-o", str(out), "--format", "pdf,markdown"]
        subprocess.run([*run, "--engine", args.engine, "-q"], check=True)
        print(f"engine {args.engine}; 10-pt type on 12-pt leading, 300 dpi\n")
        print(f"{'gutter pt':>9} {'CER md':>8} {'CER pdftotext':>14} {'ratio':>8}")
        for gutter, (name, truth) in zip(gutters, truths.items(), strict=True):
            markdown = (out / "markdown" / f"{name}.md").read_text(encoding="utf-8")
            own = score_text(truth, markdown).cer
            layer = score_text(truth, pdftotext(out / "pdf" / f"{name}.pdf")).cer
            ratio = layer / own if own else (1.0 if layer == 0 else float("inf"))
            print(f"{gutter:>9g} {own:>8.3f} {layer:>14.3f} {ratio:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

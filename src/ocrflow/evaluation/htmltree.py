"""A small element tree built with the standard library's HTML parser.

Enough of a DOM for reading tables out of OCR output: elements nest as written, an end tag
closes the innermost open element of its name (stray end tags are ignored, as the
reference's BeautifulSoup ``html.parser`` builder does), void elements never hold children.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = frozenset(
    (
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    )
)


@dataclass(eq=False)
class Node:
    """An element (``tag``) or, when ``tag`` is empty, a text run (``data``)."""

    tag: str
    attrs: dict[str, str | None] = field(default_factory=dict)
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    data: str = ""

    def iter(self) -> Iterator[Node]:
        """This node's descendants in document order (not the node itself)."""
        for child in self.children:
            yield child
            yield from child.iter()

    def find_all(self, tag: str) -> list[Node]:
        """Descendant elements named ``tag``."""
        return [n for n in self.iter() if n.tag == tag]

    def children_named(self, tags: tuple[str, ...]) -> list[Node]:
        """Direct child elements with one of the names in ``tags``."""
        return [c for c in self.children if c.tag in tags]

    def has_ancestor(self, tag: str) -> bool:
        """Whether an enclosing element is named ``tag``."""
        node = self.parent
        while node is not None:
            if node.tag == tag:
                return True
            node = node.parent
        return False

    def text(self) -> str:
        """All text inside, ``<br>`` read as a line break."""
        parts = []
        for node in self.iter():
            if node.tag == "br":
                parts.append("\n")
            elif not node.tag:
                parts.append(node.data)
        return "".join(parts)


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs), parent=self.stack[-1])
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, dict(attrs), parent=self.stack[-1]))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(Node("", parent=self.stack[-1], data=data))


def parse_html(text: str) -> Node:
    """Parse ``text`` (HTML fragments inside Markdown are fine) into a tree."""
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    return builder.root

"""Config text -> a small tree of `Node`s that remember where each element and attribute was
written. Safe by construction: no entity is expanded, no DTD loaded, no network touched.

OpenVINO's own configs hold several top-level <CustomLayer> siblings with no root, which strict
XML rejects. We wrap the text in a synthetic root *on the same line* as the original first
character, so every line number lxml reports is the user's. An XML declaration cannot follow our
root tag, so it (and an entity-free DOCTYPE) is blanked out with spaces, keeping lines and
columns where they were.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

from lxml import etree

from .diagnostics import Diagnostics, Location
from .limits import MAX_CONFIG_BYTES, MAX_ELEMENTS
from .messages import clipped

LAYER_TAG = "CustomLayer"
_ROOT = "customlayers-synthetic-root"
_OPEN = f"<{_ROOT}>"
_CLOSE = f"</{_ROOT}>"

_DECL = re.compile(r"\A\s*<\?xml\s.*?\?>", re.S)
_DECL_ENCODING = re.compile(rb"\A\s*<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")
# the prolog: what may come before the first element (whitespace, comments, PIs, one DOCTYPE)
_PROLOG_SPACE = re.compile(r"\s+")
_DOCTYPE_OPEN = re.compile(r"<!DOCTYPE(?=[\s\[>])")
# inside a DOCTYPE's internal subset: skipped whole, so a ']' or '>' in them does not end it
_SUBSET_PLAIN = re.compile(r"[^\[\]<>\"']+")
_SUBSET_SKIP = re.compile(r"<!--.*?-->|<\?.*?\?>|\"[^\"]*\"|'[^']*'", re.S)
# text that can hold a '<' that is not a start tag; masked before locating start tags
_NOT_MARKUP = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>", re.S)
# a start tag's '<' and name (end tags, comments, PIs and the like start with '</', '<!', '<?')
_NOT_NEWLINE = re.compile(r"[^\n]+")
_START_TAG = re.compile(r"<([^\s/>!?][^\s/>]*)")
# the rest of a start tag, up to its '>': a quoted value may hold '>'
_TAG_REST = re.compile(r"""(?:[^"'>]+|"[^"]*"|'[^']*')*""")
# an attribute's name and value in a start tag; the lookbehind makes a name start only after
# whitespace, so a long run of name characters is tried once, not once per character
_ATTRIBUTE = re.compile(r"(?<=\s)([^\s=<>/\"']+)\s*=\s*(?:\"[^\"]*\"|'[^']*')")


@dataclass
class Node:
    """One XML element: tag, attributes as written (text), children, and places."""
    tag: str
    attrs: dict[str, str]
    location: Location
    attr_locations: dict[str, Location] = field(default_factory=dict)
    children: list["Node"] = field(default_factory=list)

    def where(self, attr: str | None = None) -> Location:
        """The place of an attribute (or of the element when absent or not given)."""
        if attr is not None and attr in self.attr_locations:
            return self.attr_locations[attr]
        return self.location

    def find_all(self, tag: str) -> list["Node"]:
        return [c for c in self.children if c.tag == tag]


@dataclass
class Document:
    """The elements at layer level (normally <CustomLayer>s) and the container, if any."""
    file: str
    nodes: list[Node]
    container: Node | None = None
    # text inside elements, (text, where, the element's tag): schema.py says where no
    # element holds any
    stray: list = field(default_factory=list)


def _blank(text: str, start: int, end: int) -> str:
    """Replace text[start:end] by spaces, keeping newlines (so lines and columns stay put)."""
    return text[:start] + _spaces(text[start:end]) + text[end:]


def _spaces(text: str) -> str:
    """`text` with every character but newlines made a space (by runs: one call per line)."""
    return _NOT_NEWLINE.sub(lambda m: " " * len(m.group(0)), text)


class _TextIndex:
    """Offsets in the text <-> 1-based (line, column)."""

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def location(self, file: str, offset: int) -> Location:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:  # last line start <= offset
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return Location(file, lo + 1, offset - self.line_starts[lo] + 1)

    def line_of(self, offset: int) -> int:
        return self.location("", offset).line


def decode(data: bytes | str, file: str, diags: Diagnostics) -> str | None:
    """Bytes -> text, honouring a BOM or the declared encoding; None (and CL003) when it fails."""
    if isinstance(data, str):
        return data[1:] if data.startswith("\ufeff") else data
    if data.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        m = _DECL_ENCODING.match(data)
        encoding = m.group(1).decode("ascii") if m else "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        diags.error(Location(file, 1, 1), "CL003",
                    f"the XML declaration names encoding '{clipped(encoding)}', which Python does "
                    f"not know")
        return None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        diags.error(Location(file, line, 1), "CL003",
                    f"byte 0x{data[e.start]:02x} at offset {e.start} is not valid {encoding}")
        return None
    return text[1:] if text.startswith("\ufeff") else text


def _prepare(text: str, file: str, diags: Diagnostics) -> str | None:
    """Blank the XML declaration and an entity-free DOCTYPE; refuse a DOCTYPE with entities.

    A DOCTYPE exists only in the prolog, before the first element: the prolog is walked item
    by item (comments and PIs skipped whole), so DOCTYPE-like text in a comment, a CDATA section
    or a PI is never taken for one. Whatever follows the first element goes to lxml inside our
    root element, where a DOCTYPE or an entity declaration is not well-formed: nothing that
    looks like a DTD can reach the parser."""
    decl = _DECL.match(text)
    if decl:
        text = _blank(text, decl.start(), decl.end())
    start = _doctype_in_prolog(text)
    if start is None:
        return text
    line = text.count("\n", 0, start) + 1
    column = start - text.rfind("\n", 0, start)
    end = _doctype_end(text, start)
    if end is None:
        diags.error(Location(file, line, column), "CL001", "the DOCTYPE declaration is not closed")
        return None
    if "<!ENTITY" in text[start:end]:
        diags.error(Location(file, line, column),
                    "CL002", "the DOCTYPE declares entities; entities are refused (never expanded)"
                    " because they can expand without bound or read other files")
        return None
    diags.warning(Location(file, line, column), "CL005",
                  "the DOCTYPE is ignored: no DTD is loaded and nothing is validated against it")
    return _blank(text, start, end)


def _doctype_in_prolog(text: str) -> int | None:
    """Offset of the DOCTYPE when the prolog has one; None when the first element (or anything
    else) comes first."""
    pos = 0
    while pos < len(text):
        space = _PROLOG_SPACE.match(text, pos)
        if space:
            pos = space.end()
            continue
        if text.startswith("<!--", pos):
            end = text.find("-->", pos + 4)
        elif text.startswith("<?", pos):
            end = text.find("?>", pos + 2)
        else:
            return pos if _DOCTYPE_OPEN.match(text, pos) else None
        if end == -1:
            return None  # an unclosed comment or PI: lxml reports it
        pos = end + 3 if text.startswith("<!--", pos) else end + 2
    return None


def _doctype_end(text: str, start: int) -> int | None:
    """End offset (after '>') of the DOCTYPE at `start`: its '>' comes after the optional
    [internal subset], whose comments, PIs and quoted strings may hold ']' and '>'. Quoted
    strings before the subset (the SYSTEM or PUBLIC literals) may hold them too."""
    pos = start + len("<!DOCTYPE")
    in_subset = False
    while pos < len(text):
        plain = _SUBSET_PLAIN.match(text, pos)
        if plain:
            pos = plain.end()
            continue
        skip = _SUBSET_SKIP.match(text, pos) if text[pos] in "<\"'" else None
        if skip:
            pos = skip.end()
            continue
        if text[pos] in "<\"'" and (text[pos] != "<" or text.startswith(("<!--", "<?"), pos)):
            return None  # an unclosed comment, PI or literal
        c = text[pos]
        if c == "[" and not in_subset:
            in_subset = True
        elif c == "]" and in_subset:
            in_subset = False
        elif c == ">" and not in_subset:
            return pos + 1
        pos += 1
    return None


def _parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                           dtd_validation=False, huge_tree=False, remove_comments=True,
                           remove_pis=True, recover=False)


def _syntax_error(e: etree.XMLSyntaxError, file: str, diags: Diagnostics) -> None:
    line, column = e.position if e.position else (e.lineno or 0, 1)
    if line == 1:
        column = max(1, column - len(_OPEN))
    message = (e.msg or str(e)).strip()
    # libxml2 may append "\n, line N, column M" (the place is in the diagnostic already); a
    # diagnostic is one line
    message = " ".join(message.split("\n")[0].split())
    message = message.replace(_ROOT, "(the file's end)")
    diags.error(Location(file, line, max(1, column)), "CL001", f"not well-formed XML: {message}")


class _Locator:
    """Finds each element's start tag in the (masked) text, in document order."""

    def __init__(self, text: str, file: str):
        masked = _NOT_MARKUP.sub(lambda m: _spaces(m.group(0)), text)
        self.text = masked
        self.index = _TextIndex(masked)
        self.file = file
        self.cursor = 0

    def element(self, tag: str, sourceline: int) -> tuple[Location, int, int]:
        """Location of '<tag', and the span of its start tag (for finding attributes). Elements
        come in document order and, with comments, CDATA and PIs masked, every '<' that is not
        '</' starts the next element: one precompiled pattern, no search per tag name."""
        m = _START_TAG.search(self.text, self.cursor)
        if m is None or m.group(1).split(":")[-1] != tag:
            # cannot happen for well-formed text; degrade to the line lxml gives
            return Location(self.file, sourceline or 0, 1), self.cursor, self.cursor
        end = self._tag_end(m.end())  # a quoted value may hold '>': scan, do not find()
        self.cursor = m.end()
        return self.index.location(self.file, m.start()), m.start(), end

    def _tag_end(self, pos: int) -> int:
        """Offset of the '>' that ends the start tag whose name ends at `pos`."""
        return _TAG_REST.match(self.text, pos).end()

    def attributes(self, start: int, end: int) -> dict[str, Location]:
        """Local attribute name -> its place, for the start tag text[start:end]. The pattern
        consumes each quoted value, so text inside a value is never taken for a name."""
        found: dict[str, Location] = {}
        for m in _ATTRIBUTE.finditer(self.text, start, end):
            found.setdefault(m.group(1).split(":")[-1], self.index.location(self.file, m.start(1)))
        return found


def _attributes(el) -> dict[str, str]:
    """An element's attributes as written. lxml looks each value up by name, quadratic in their
    number (40,000 attributes: 8 s); past a few, XPath hands them all over in one pass."""
    if len(el.keys()) <= 16:
        return {str(k): str(v) for k, v in el.items()}
    return {str(a.attrname): str(a) for a in el.xpath("@*")}


def _convert(el, locator: _Locator, stray: list) -> Node:
    """The element as a Node; text inside it (no element of a config holds any: a doubled
    '/>', a value written as text) goes to `stray` as (text, where, inside which tag)."""
    tag = el.tag if isinstance(el.tag, str) else str(el.tag)
    loc, start, end = locator.element(etree.QName(el).localname if "}" in tag else tag,
                                      el.sourceline or 0)
    attrs = _attributes(el)
    node = Node(tag, attrs, loc)
    places = locator.attributes(start, end)
    for name in attrs:
        node.attr_locations[name] = places.get(name.split("}")[-1], loc)
    if el.text and el.text.strip():
        stray.append((el.text.strip(), loc, tag))
    for child in el:
        if isinstance(child.tag, str):  # skip comments, PIs and unexpanded entity nodes
            node.children.append(_convert(child, locator, stray))
            where = node.children[-1].location
        else:
            where = Location(locator.file, child.sourceline or loc.line, 1)
        if child.tail and child.tail.strip():
            stray.append((child.tail.strip(), where, tag))
    return node


def _over_element_limit(text: str) -> bool:
    """Whether `text` has more than MAX_ELEMENTS start tags, counted outside comments, CDATA
    and PIs, and only up to the limit: checked before lxml builds the tree, which for 200 MB of
    `<a/>` took 7 GB before the count of its elements could refuse it. (In well-formed XML a
    '<' starts a tag everywhere else: attribute values cannot hold one.)"""
    masked = _NOT_MARKUP.sub(" ", text) if "<!" in text or "<?" in text else text
    count = 0
    for _ in _START_TAG.finditer(masked):
        count += 1
        if count > MAX_ELEMENTS:
            return True
    return False


def parse_document(data: bytes | str, file: str, diags: Diagnostics) -> Document | None:
    """Parse one config; None when it is not usable XML (the reason is in `diags`)."""
    if len(data) > MAX_CONFIG_BYTES:
        unit = "bytes" if isinstance(data, bytes) else "characters"
        diags.error(Location(file, 1, 1), "CL006",
                    f"the config is {len(data)} {unit} long; a config has at most "
                    f"{MAX_CONFIG_BYTES} (real ones have a few kilobytes)")
        return None
    text = decode(data, file, diags)
    if text is None:
        return None
    text = _prepare(text, file, diags)
    if text is None:
        return None
    too_many = (f"the file has more than {MAX_ELEMENTS} elements; a config has at most "
                f"{MAX_ELEMENTS} (real ones have tens to hundreds, and checking costs time per "
                f"element)")
    if _over_element_limit(text):
        diags.error(Location(file, 1, 1), "CL006", too_many)
        return None
    try:
        root = etree.fromstring(_OPEN + text + _CLOSE, _parser())
    except etree.XMLSyntaxError as e:
        _syntax_error(e, file, diags)
        return None
    except ValueError as e:  # e.g. characters XML does not allow in a Python str
        diags.error(Location(file, 1, 1), "CL001",
                    f"not well-formed XML: {' '.join(str(e).split())}")
        return None
    if sum(1 for _ in root.iter()) - 1 > MAX_ELEMENTS:   # the synthetic root does not count
        diags.error(Location(file, 1, 1), "CL006", too_many)
        return None
    locator = _Locator(text, file)
    stray: list = []
    top = [_convert(el, locator, stray) for el in root if isinstance(el.tag, str)]
    if len(top) == 1 and top[0].tag != LAYER_TAG and top[0].find_all(LAYER_TAG):
        return Document(file, top[0].children, container=top[0], stray=stray)
    return Document(file, top, stray=stray)

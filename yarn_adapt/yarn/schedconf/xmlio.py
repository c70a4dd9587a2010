"""lxml plumbing shared by the capacity and fair document modules.

This is the one place where ``OSError`` and ``lxml.etree.XMLSyntaxError`` become
:class:`~yarn_adapt.errors.ConfigFileError`. It also holds the whitespace-aware edit
helpers that let a patched document keep the indentation of the file it came from:
new elements copy the layout of their neighbours, removed elements take their
surrounding whitespace with them.

Hostile input: a document with a DOCTYPE is refused before and after parsing (no
entity is ever expanded, nor read as empty), and a document larger than
:func:`max_document_bytes` (4 MiB unless ``$YARN_ADAPT_MAX_XML_BYTES`` says otherwise)
is refused before it is read whole or parsed.

Writes are atomic and durable (:func:`write_bytes_atomically`): a temporary file in
the target's directory is written and fsynced, renamed over the target, and the
directory is fsynced, so after a crash the file is either the old one or the new one,
and a step journaled after the write never describes a write the disk lost.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from yarn_adapt.errors import ConfigFileError

Element = etree._Element

# Entities are not expanded and nothing is fetched: an allocation file must not be
# able to read other files or the network through the parser.
_PARSER = etree.XMLParser(
    resolve_entities=False,
    load_dtd=False,
    no_network=True,
    huge_tree=False,
    remove_blank_text=False,
    remove_comments=False,
    remove_pis=False,
    strip_cdata=False,
)
_DECLARATION = re.compile(rb"^\s*(<\?xml[^>]*\?>)")
_DOCTYPE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
_ELEMENT_START = re.compile(rb"<[A-Za-z_:]")
MAX_BYTES_ENV = "YARN_ADAPT_MAX_XML_BYTES"
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
_ENCODING = re.compile(rb"""encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
FRESH_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>'
DEFAULT_INDENT_UNIT = "  "


@dataclass(frozen=True, eq=False)
class RawDocument:
    """A parsed XML file: where it came from, its tree, and its XML declaration as
    written (reused verbatim so an untouched file serialises to the same text)."""

    source: str
    tree: etree._ElementTree
    declaration: str | None

    @property
    def root(self) -> Element:
        return self.tree.getroot()

    @property
    def root_name(self) -> str:
        return local_name(self.root)

    def copy(self) -> RawDocument:
        return RawDocument(self.source, _copy_tree(self.tree), self.declaration)

    def error(self, problem: str, element: Element | None = None) -> ConfigFileError:
        """A ConfigFileError naming this file and, when known, the line of ``element``."""
        line = element.sourceline if element is not None else None
        return ConfigFileError(self.source, f"line {line}: {problem}" if line else problem)


def max_document_bytes() -> int:
    """The largest scheduler document read or parsed: ``$YARN_ADAPT_MAX_XML_BYTES``,
    else 4 MiB (a real capacity-scheduler.xml is a few KB)."""
    configured = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not configured:
        return DEFAULT_MAX_BYTES
    try:
        limit = int(configured)
    except ValueError:
        raise ConfigFileError(
            f"${MAX_BYTES_ENV}", f"expected a number of bytes, got {configured!r}"
        ) from None
    if limit <= 0:
        raise ConfigFileError(f"${MAX_BYTES_ENV}", f"must be positive, got {limit}")
    return limit


def read_document_bytes(path: str | os.PathLike[str]) -> bytes:
    """The raw bytes of an XML file, refusing one larger than the size cap before
    reading it whole."""
    source = os.fspath(path)
    limit = max_document_bytes()
    try:
        with Path(source).open("rb") as stream:
            data = stream.read(limit + 1)
    except OSError as exc:
        raise ConfigFileError(source, f"cannot read: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise ConfigFileError(source, _too_large(limit))
    return data


def _too_large(limit: int) -> str:
    return (
        f"larger than {limit} bytes, the limit for a scheduler file "
        f"(raise ${MAX_BYTES_ENV} if it is really that large)"
    )


def read_document(path: str | os.PathLike[str]) -> RawDocument:
    """Read and parse an XML file; every failure is a one-line ConfigFileError."""
    source = os.fspath(path)
    return parse_document(read_document_bytes(source), source)


def parse_document(data: str | bytes, source: str = "<string>") -> RawDocument:
    """Parse XML text (``str`` or the raw bytes of a file)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    limit = max_document_bytes()
    if len(raw) > limit:
        raise ConfigFileError(source, _too_large(limit))
    declaration = _DECLARATION.match(raw)
    declaration_text = declaration.group(1).decode("ascii", "replace") if declaration else None
    if isinstance(data, str) and declaration:
        # The text is already decoded: drop the declaration so the encoding it names
        # does not make lxml decode a second time. It is written back as it was.
        raw = raw[declaration.end() :]
    if not raw.strip():
        raise ConfigFileError(source, "empty file, expected XML")
    _refuse_doctype(raw, source)
    try:
        tree = etree.ElementTree(etree.fromstring(raw, _PARSER))
    except etree.XMLSyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        raise ConfigFileError(source, f"{where}not well-formed XML: {exc.msg}") from exc
    if getattr(tree.docinfo, "doctype", ""):  # an encoding the byte check cannot read
        raise ConfigFileError(source, _DOCTYPE_REFUSED)
    return RawDocument(source, tree, declaration_text)


_DOCTYPE_REFUSED = (
    "a DOCTYPE declaration is not accepted in a scheduler file "
    "(its entities would be expanded, or read as empty); remove it"
)


def _refuse_doctype(raw: bytes, source: str) -> None:
    """A DOCTYPE can only stand before the root element (the prolog)."""
    root = _ELEMENT_START.search(raw)
    found = _DOCTYPE.search(raw, 0, root.start() if root else len(raw))
    if found is not None:
        line = raw.count(b"\n", 0, found.start()) + 1
        raise ConfigFileError(source, f"line {line}: {_DOCTYPE_REFUSED}")


def empty_document(root_tag: str, source: str = "<new>") -> RawDocument:
    """A document holding only an empty root element, used to write a fresh file."""
    return RawDocument(source, etree.ElementTree(etree.Element(root_tag)), FRESH_DECLARATION)


def serialize(document: RawDocument) -> str:
    """The document as text, with the original XML declaration when there was one."""
    # lxml keeps no whitespace between the nodes around the root element (processing
    # instructions, comments): put each on its own line as files usually do.
    root = document.root
    nodes = [*reversed(list(root.itersiblings(preceding=True))), root, *root.itersiblings()]
    parts = [document.declaration] if document.declaration else []
    doctype: str = getattr(document.tree.docinfo, "doctype", "")  # absent from lxml-stubs
    if doctype:
        parts.append(doctype)
    parts += [etree.tostring(node, encoding="unicode", with_tail=False) for node in nodes]
    return "\n".join(parts) + "\n"


def declared_encoding(document: RawDocument) -> str:
    match = _ENCODING.search((document.declaration or "").encode("ascii", "replace"))
    return match.group(1).decode("ascii") if match else "utf-8"


def write_atomically(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` encoded as ``encoding`` (see
    :func:`write_bytes_atomically`)."""
    try:
        data = text.encode(encoding, "xmlcharrefreplace")
    except LookupError as exc:
        raise ConfigFileError(os.fspath(path), f"cannot write: {exc}") from exc
    write_bytes_atomically(path, data)


def write_bytes_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename, durably: a reader (the RM's
    allocation reload thread) never sees half a file, and once this returns the new
    content survives a power cut (temporary file fsynced before the rename, the
    directory fsynced after it). The file keeps its permission bits and its owner
    and group: the RM, running as ``yarn``, must still read the file (and a rollback
    write it) after a root-run service replaced it. A writer that may not give the
    new file the old owner (not root, not the owner) changes nothing and says so."""
    target = Path(path)
    try:
        before = target.stat() if target.exists() else None
        handle, temporary = tempfile.mkstemp(prefix=temporary_prefix(target), dir=target.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                if before is not None:
                    _keep_owner_and_mode(stream.fileno(), before, target)
                os.fsync(stream.fileno())
            Path(temporary).replace(target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        fsync_directory(target.parent)
    except OSError as exc:
        raise ConfigFileError(os.fspath(path), f"cannot write: {exc}") from exc


def _keep_owner_and_mode(descriptor: int, before: os.stat_result, target: Path) -> None:
    written = os.fstat(descriptor)
    if (written.st_uid, written.st_gid) != (before.st_uid, before.st_gid):
        try:
            os.fchown(descriptor, before.st_uid, before.st_gid)
        except PermissionError as exc:
            raise PermissionError(
                f"cannot keep its owner {before.st_uid}:{before.st_gid} (this process runs "
                f"as {os.geteuid()}:{os.getegid()}); run as that user or as root"
            ) from exc
    os.fchmod(descriptor, before.st_mode & 0o7777)  # after chown, which clears set-id bits


def temporary_prefix(target: Path) -> str:
    """How the temporary files of :func:`write_bytes_atomically` start: a crash
    between their creation and the rename leaves one, which recovery removes."""
    return f".{target.name}.yarn-adapt-tmp-"


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Delete what a crashed atomic write of ``target`` left behind (call it only
    while holding the target's apply lock)."""
    stale = sorted(target.parent.glob(temporary_prefix(target) + "*"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename or a new file in ``directory`` durable."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _copy_tree(tree: etree._ElementTree) -> etree._ElementTree:
    # deepcopy of an ElementTree keeps the comments and processing instructions that
    # sit beside the root element.
    return copy.deepcopy(tree)


# --------------------------------------------------------------------------- reading


def local_name(element: Element) -> str:
    """The tag without a namespace; '' for comments and processing instructions."""
    tag: object = element.tag
    if not isinstance(tag, str):
        return ""
    return etree.QName(tag).localname


def child_elements(parent: Element) -> Iterator[Element]:
    """Element children only (comments and processing instructions skipped)."""
    return (child for child in parent if local_name(child))


def is_simple(element: Element) -> bool:
    """True when the element holds only text (no child nodes of any kind)."""
    return len(element) == 0


def text_of(element: Element) -> str:
    return element.text or ""


# --------------------------------------------------------------------------- layout


def indent_unit(document: RawDocument) -> str:
    """The indentation step the file uses (taken from its first indented line)."""
    match = re.search(r"\n([ \t]+)", document.root.text or "")
    return match.group(1) if match else DEFAULT_INDENT_UNIT


def _whitespace_before(element: Element) -> str | None:
    previous = element.getprevious()
    if previous is not None:
        return previous.tail
    parent = element.getparent()
    return parent.text if parent is not None else None


def indent_of(element: Element) -> str | None:
    """The indentation of ``element``'s line; None when the file does not put it on a
    line of its own (a compact one-line layout)."""
    if element.getparent() is None:
        return ""
    before = _whitespace_before(element)
    if before is None or "\n" not in before:
        return None
    return before.rsplit("\n", 1)[1]


def insert_after(anchor: Element, new: Element) -> None:
    """Insert ``new`` as the next sibling of ``anchor`` with the same separator."""
    parent = anchor.getparent()
    assert parent is not None, "cannot insert beside the document root"
    new.tail = anchor.tail
    if anchor.getnext() is None:
        anchor.tail = _sibling_separator(parent, anchor)
    parent.insert(parent.index(anchor) + 1, new)


def _sibling_separator(parent: Element, last: Element) -> str | None:
    """Whitespace between two siblings: what precedes the last child of ``parent``."""
    return _whitespace_before(last) if last.getprevious() is not None else parent.text


def insert_before(reference: Element, new: Element) -> None:
    parent = reference.getparent()
    assert parent is not None, "cannot insert beside the document root"
    new.tail = _whitespace_before(reference)
    parent.insert(parent.index(reference), new)


def append_child(parent: Element, new: Element, unit: str) -> None:
    """Append ``new`` as the last child of ``parent``, indented one ``unit`` deeper."""
    children = list(parent)
    if children:
        insert_after(children[-1], new)
        return
    indent = indent_of(parent)
    if indent is None:
        parent.append(new)
        return
    parent.text = "\n" + indent + unit
    new.tail = "\n" + indent
    parent.append(new)


def insert_first(parent: Element, new: Element, unit: str) -> None:
    children = list(parent)
    if children:
        insert_before(children[0], new)
    else:
        append_child(parent, new, unit)


def remove_element(element: Element) -> None:
    """Remove ``element`` and the whitespace that separated it from its neighbours."""
    parent = element.getparent()
    assert parent is not None, "cannot remove the document root"
    previous = element.getprevious()
    is_last = element.getnext() is None
    if is_last and previous is not None:
        previous.tail = element.tail
    elif is_last and (parent.text or "").strip() == "":
        parent.text = None
    parent.remove(element)


def arrange(elements: list[Element]) -> None:
    """Put ``elements`` into the places they occupy now, in the order given (each
    place keeps its surrounding whitespace). Used when a model reorders things the
    file lists: unknown properties, child queues."""
    if len(elements) < 2:
        return
    root = elements[0].getroottree().getroot()
    position = {id(node): index for index, node in enumerate(root.iter())}
    current = sorted(elements, key=lambda element: position[id(element)])
    if current == elements:
        return
    tails = [element.tail for element in current]
    holders = [etree.Comment("slot") for _ in current]
    for element, holder in zip(current, holders, strict=True):
        parent = element.getparent()
        assert parent is not None, "cannot move the document root"
        parent.replace(element, holder)
    for holder, element, tail in zip(holders, elements, tails, strict=True):
        parent = holder.getparent()
        assert parent is not None
        parent.replace(holder, element)
        element.tail = tail


def new_child_element(parent: Element, tag: str) -> Element:
    """A detached element in the same namespace as ``parent``."""
    namespace = etree.QName(parent).namespace
    return etree.Element(f"{{{namespace}}}{tag}" if namespace else tag)


def reindent(element: Element, extra: str) -> None:
    """Indent every line inside ``element`` by ``extra`` (after moving it a level
    deeper). The element's own tail is left to the caller."""
    for node in element.iter():
        if node is not element and node.tail and "\n" in node.tail:
            node.tail = node.tail.replace("\n", "\n" + extra)
        if len(node) and node.text and "\n" in node.text:
            node.text = node.text.replace("\n", "\n" + extra)

"""Documents as semantic trees (H2MT 3.1): the Tree type, the builders per input kind, and
token-limit splitting. Public face: ``Tree``, ``Node``, ``TreeAssembler``, ``DocumentError``,
``build_tree`` (file -> tree); the builders live in ``document.builders``."""
from engine.document.tree import DocumentError, Node, Tree, TreeAssembler
from engine.document.build import build_tree  # noqa: E402 (after the types it builds)

__all__ = ["DocumentError", "Node", "Tree", "TreeAssembler", "build_tree"]

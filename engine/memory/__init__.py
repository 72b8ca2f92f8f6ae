"""Memories (H2MT 3.2): the frozen backbone, the learned small parts, the bottom-up writer, the
aggregation policies (appendix B) and the ArcAligner gate. Public face: ``load_backbone``,
``H2MTParts``, ``load_or_init_parts``, ``write_memories``, ``RouterProjections``."""
from engine.memory.backbone import Backbone, load_backbone
from engine.memory.parts import H2MTParts, load_or_init_parts
from engine.memory.projections import RouterProjections
from engine.memory.writer import write_memories

__all__ = ["Backbone", "H2MTParts", "RouterProjections", "load_backbone", "load_or_init_parts",
           "write_memories"]

"""What a running engine holds: settings, the frozen backbone, the trained parts, the library.

Loading the backbone costs seconds, so callers (CLI, app, benches) build one Runtime and pass it
around; nothing here is global.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.memory.backbone import Backbone, load_backbone
from engine.memory.parts import H2MTParts, load_or_init_parts
from engine.settings import Settings
from storage import Library


@dataclass
class Runtime:
    settings: Settings
    backbone: Backbone
    parts: H2MTParts
    library: Library
    fingerprint: str = field(init=False)
    # Per-process caches (trees and memories read from storage, flat-baseline indexes), keyed
    # by document and fingerprint; never shared across processes.
    cache: dict = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.fingerprint = self.parts.fingerprint(self.backbone.name)

    @classmethod
    def load(cls, settings: Settings) -> "Runtime":
        backbone = load_backbone(settings)
        parts = load_or_init_parts(settings, backbone)
        return cls(settings, backbone, parts, Library(settings.database_url))

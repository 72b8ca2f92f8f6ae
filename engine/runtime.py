"""What a running engine holds: settings, the frozen backbone, the trained parts, the library.

Loading the backbone costs seconds, so callers (CLI, app, benches) build one Runtime and pass it
around; nothing here is global.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.answer.checks.confidence import Confidence
from engine.answer.generation.reader import InProcessReader
from engine.answer.passages.ranking import PassageRanker
from engine.answer.passages.short_answer import TermScorer
from engine.memory.backbone import Backbone, load_backbone
from engine.memory.parts import H2MTParts, load_or_init_parts
from engine.routing.fusion import FusionWeights
from engine.serving.cpu_slots import CpuSlots, default_size
from engine.serving.reader import Reader
from engine.serving.remote_decoding import ServedReader
from engine.serving.remote_reader import RemoteReader
from engine.settings import Settings, SettingsError
from storage import Library

# The learned parts read from a fitted JSON file that a setting names (``Settings.<name>_path``;
# "none": no part): name -> the class whose ``load(path)`` reads it (``Runtime.learned``). The
# fusion weights are read when the runtime is built (routing needs them on every ask).
LEARNED = {"answer_check": Confidence, "passage_ranker": PassageRanker,
           "short_answer": TermScorer}


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

    fusion: FusionWeights = field(init=False)
    cpu_slots: CpuSlots = field(init=False)  # the asks' CPU stages, a bounded fair pool
    _encoder: object = field(default=None, init=False, repr=False)
    _reader: Reader | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.fingerprint = self.parts.fingerprint(self.backbone.name)
        self.cpu_slots = CpuSlots(self.settings.cpu_slots or default_size())
        path = self.settings.fusion_path
        self.fusion = FusionWeights.from_json(path) if path is not None else FusionWeights()

    def learned(self, name: str):
        """The learned part ``name`` (a key of ``LEARNED``), read once from the file its setting
        names; None when the setting is "none"."""
        if name not in self.cache:
            path = getattr(self.settings, f"{name}_path")
            self.cache[name] = LEARNED[name].load(path) if path is not None else None
        return self.cache[name]

    @property
    def encoder(self):
        """The dense channel's sentence encoder (loaded on first use), or None when disabled."""
        if self.settings.dense_encoder == "none":
            return None
        if self._encoder is None:
            from engine.routing.dense import load_encoder

            self._encoder = load_encoder(self.settings.device)
        return self._encoder

    @property
    def reader(self) -> Reader:
        """The model that reads text (``Settings.reader``): the backbone itself when the setting
        names it; a served model's client when it is a URL (nothing loaded: the backbone's
        tokenizer counts for it); else loaded on first use like a backbone (``load_backbone``)."""
        if self._reader is not None:
            return self._reader
        spec = getattr(self.settings, "reader", self.settings.backbone)
        if self.settings.reader_is_remote:
            self._reader = ServedReader(RemoteReader.from_settings(self.settings), self.backbone)
        elif spec == self.settings.backbone:
            self._reader = InProcessReader(self.backbone)
        else:
            try:
                model = load_backbone(replace(self.settings, backbone=spec))
            except (OSError, ValueError) as e:  # a missing folder or file, a bad or unreachable hub id
                raise SettingsError(f"H2MT_READER={spec!r} cannot be loaded: "
                                    f"{str(e).splitlines()[0]}") from None
            self._reader = InProcessReader(model)
        return self._reader

    def model_settings(self, model) -> Settings:
        """The settings that load ``model`` (the backbone's, or the local reader's) again, in
        another process (``engine.serving.worker_process``)."""
        if model is self.backbone.model:
            return self.settings
        reader = self.reader
        if isinstance(reader, InProcessReader) and model is reader.backbone.model:
            return replace(self.settings, backbone=self.settings.reader)
        raise ValueError("this model is neither the runtime's backbone nor its reader")

    @property
    def reader_label(self) -> str:
        """Who reads text, as the app, the CLI and the JSON show it: the served model and its
        URL, or the local model's name (loading it if it is not the backbone)."""
        return self.reader.label

    @classmethod
    def load(cls, settings: Settings) -> "Runtime":
        backbone = load_backbone(settings)
        parts = load_or_init_parts(settings, backbone)
        return cls(settings, backbone, parts, Library(settings.database_url))

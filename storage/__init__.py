"""Persistent storage of documents, their trees, node memories and the query log."""
from storage.errors import (DocumentNotFound, DuplicateDocument, MissingMemories, StaleMemories,
                            StorageError)
from storage.library import Library
from storage.records import (DocumentInfo, DocumentMeta, MemoryProgress, NodeEvidence,
                             QueryRecord)

__all__ = ["DocumentInfo", "DocumentMeta", "DocumentNotFound", "DuplicateDocument", "Library",
           "MemoryProgress", "MissingMemories", "NodeEvidence", "QueryRecord", "StaleMemories", "StorageError"]

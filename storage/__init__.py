"""Persistent storage of documents, their trees, node memories and the query log."""
from storage.errors import (DatabaseUnavailable, DocumentNotFound, DuplicateDocument, MissingMemories, StaleMemories,
                            StorageError)
from storage.faults import Fault, StorageFault, classify
from storage.jobs import LeaseLost, MemoryJob, MemoryJobs
from storage.library import Library
from storage.records import (DocumentInfo, DocumentMeta, MemoryProgress, NodeEvidence,
                             QueryEntry, QueryRecord, SourceFile)

__all__ = ["DatabaseUnavailable", "DocumentInfo", "DocumentMeta", "DocumentNotFound", "DuplicateDocument", "Fault", "LeaseLost", "Library",
           "MemoryJob", "MemoryJobs",
           "MemoryProgress", "MissingMemories", "NodeEvidence", "QueryEntry", "QueryRecord",
           "SourceFile", "StaleMemories",
           "StorageError", "StorageFault", "classify"]

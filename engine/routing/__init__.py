"""Routing (H2MT 3.3): top-down per-parent top-k over a tree, with a trace of every scored node.
Public face: ``RoutingTree``, ``Route``, ``route``, ``query_vector``; ``hits`` holds the routing
hit rule shared by training validation and the benches."""
from engine.routing.router import Route, RoutingTree, query_vector, route

__all__ = ["Route", "RoutingTree", "query_vector", "route"]

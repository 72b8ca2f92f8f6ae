"""Routing (H2MT 3.3): top-down per-parent top-k over a tree, with a trace of every scored node.
Public face: ``RoutingTree``, ``Route``, ``route``, ``query_vector``; ``hits`` holds the routing
hit rule shared by training validation and the benches."""
from engine.routing.query import query_vector
from engine.routing.router import route
from engine.routing.routing_tree import RoutingTree
from engine.routing.trace import Route

__all__ = ["Route", "RoutingTree", "query_vector", "route"]

"""gsrlang: compile rubrics into typed, acyclic evaluation graphs, check them, run them, replay them."""

__version__ = "0.1.0"

"""Reading traces: `TraceView` answers what consumers of a traced item ask (see gsrlang.trace.view)."""

from gsrlang.trace.view import TraceView

__all__ = ["TraceView"]

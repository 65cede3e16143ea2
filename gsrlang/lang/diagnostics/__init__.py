from gsrlang.lang.diagnostics.core import Diagnostic, Fix, Label, Severity, error, has_errors, warning

__all__ = ["Diagnostic", "Fix", "Label", "Severity", "error", "has_errors", "warning"]

"""Built-in tools, one module per family."""

BUILTIN_MODULES: tuple[str, ...] = (
    "workers.tools.builtin.time_tools",
    "workers.tools.builtin.math_tools",
)

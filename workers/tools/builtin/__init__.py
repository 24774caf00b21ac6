"""Built-in tools, one module per family."""

BUILTIN_MODULES: tuple[str, ...] = (
    "workers.tools.builtin.time_tools",
    "workers.tools.builtin.math_tools",
    "workers.tools.builtin.timers",
    "workers.tools.builtin.memory",
    "workers.tools.builtin.weather",
    "workers.tools.builtin.knowledge",
    "workers.tools.builtin.web",
    "workers.tools.builtin.feeds",
    "workers.tools.builtin.home",
    "workers.tools.builtin.notify",
    "workers.tools.builtin.system",
    "workers.tools.builtin.chance",
    "workers.tools.builtin.monitor_tools",
)

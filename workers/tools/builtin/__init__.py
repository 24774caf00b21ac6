"""Built-in tools, one module per family (listed in ``workers.tool_registry.assembly``)."""

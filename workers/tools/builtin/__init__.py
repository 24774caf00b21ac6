"""Built-in tools, one module per family (listed in ``workers.toolkit.assembly``)."""

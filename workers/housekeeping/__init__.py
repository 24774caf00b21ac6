"""Beat's own housekeeping: its scheduler, the sweep that ends overdue turns, and the firing
of due timers. Not a queue of the pipeline: these run on the ``monitor`` queue."""

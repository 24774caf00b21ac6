"""The system's own upkeep: beat's scheduler (for the monitors a user scheduled), and the
monitor workers' housekeeping loop that fires timers and ends overdue turns. Not a queue of
the pipeline, and no task of its own."""

"""What every stage shares: the per-process Runtime, a task's view of its turn (stage), how a
turn is handed on (handoff), ended on failure (ending) and completed (completion), leases,
crash points, provider retries, the trust checks of forged jobs, and worker hooks."""

"""Seeing the system: a turn's timeline, OpenTelemetry traces, the Prometheus exporter,
``voxqueue doctor``, and secrets kept out of logs."""

"""The benchmarks' own instruments, tested (run with the suite: pyproject's ``testpaths``)."""

"""The ``monitor`` queue: the checks of the monitors beat runs, their alerts, and the tools that
let the agent make monitors for the person."""

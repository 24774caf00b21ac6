"""The edge device: hears its wake word locally, captures a command, sends it as a turn and
plays the reply (``voxqueue edge``). It imports no worker code and no provider SDK."""

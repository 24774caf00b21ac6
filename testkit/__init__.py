"""What the tests and the benchmarks run a real system with: a private Redis server, the
environment of the system's processes, tools that probe the workers, and fakes of everything
outside voxqueue at its wire (``testkit.fakes``: the OpenAI and ElevenLabs HTTP servers, the
services tools call, a microphone, a wake word service).

Neither ``tests/`` nor ``bench/`` is imported from here, and they do not import each other
(``tests/structure`` checks it). Not installed with the package: it runs from a checkout.
"""

from testkit.system import ROOT, SPEECH, RedisServer, free_port, system_env
from voxqueue.settings import ignore_dotenv

# A test or a benchmark reads its settings from what it sets, never a developer's .env file.
ignore_dotenv()

__all__ = ["ROOT", "SPEECH", "RedisServer", "free_port", "system_env"]

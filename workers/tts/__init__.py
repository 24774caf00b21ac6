"""The ``tts`` queue: text to speech, streamed onto the turn's Redis Stream."""

"""One OpenAI SDK client per process, and the mapping of its errors to ours."""

from __future__ import annotations

from typing import TYPE_CHECKING

from voxqueue.settings import Settings
from workers.runtime.retry import ProviderError, retry_after_seconds

if TYPE_CHECKING:
    import openai


def make_openai(settings: Settings, what: str) -> openai.OpenAI:
    """An SDK client with our timeout and no SDK retries (ours are in ``call_with_retry``)."""
    import openai

    return openai.OpenAI(
        api_key=settings.providers.require_openai_key(what),
        base_url=settings.providers.openai_base_url,
        timeout=settings.providers.timeout_s,
        max_retries=0,
    )


def provider_error(exc: Exception, what: str) -> ProviderError:
    """Our ProviderError for an SDK exception: retryable on 408/409/429/5xx and I/O errors."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in (408, 409, 429) or status >= 500
        return ProviderError(f"{what} answered HTTP {status}", status=status, retryable=retryable,
                             retry_after=retry_after_seconds(exc.response.headers))
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError(f"{what} timed out", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(f"{what} is unreachable ({exc.__class__.__name__})", retryable=True)
    # Transport errors raised while a stream is read come straight from the HTTP library.
    transport = isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in (
        "httpx", "httpx2", "httpcore", "h11")
    return ProviderError(f"{what} failed: {exc.__class__.__name__}: {exc}", retryable=transport)

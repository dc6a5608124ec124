"""``elical serve``: an OpenAI-compatible HTTP server that computes a question's confidence before
generating, then answers, retrieves first or abstains (needs the ``serve`` extra: fastapi, uvicorn)."""

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as err:
    raise ImportError(f"elical serve needs the serve extra ({err.name} is missing): pip install 'elical[serve]'") from None

from elical.serve.setup import ServeConfig, build_app

__all__ = ["ServeConfig", "build_app"]

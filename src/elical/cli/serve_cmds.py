"""`elical serve`: the OpenAI-compatible server with confidence."""

from __future__ import annotations

from pathlib import Path

import typer

from elical.cli.common import _user_errors, app


@app.command()
def serve(
    model_dir: Path = typer.Argument(..., help="A trained model folder (its gate.json gives the thresholds)."),
    tau: float = typer.Option(None, help="Answer from this confidence (overrides gate.json)."),
    retrieve_below: float = typer.Option(None, help="Retrieve, then answer, from this confidence up to tau (needs --corpus)."),
    corpus: Path = typer.Option(None, help="Passages to retrieve from: JSONL {id, text, title} or a saved retriever folder."),
    upstream: str = typer.Option(None, help="Answer through this OpenAI-compatible server (base URL, e.g. http://host:8000/v1)."),
    upstream_model: str = typer.Option(None, help="The model name the upstream server serves."),
    upstream_api_key_env: str = typer.Option(None, help="Environment variable with the upstream API key (default: OPENAI_API_KEY if set)."),
    api_key_env: str = typer.Option(None, help="Environment variable holding the API key clients must send as 'Authorization: Bearer <key>' (all routes but /health)."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on (0.0.0.0: all; warned about without --api-key-env)."),
    port: int = typer.Option(8000, min=0, max=65535, help="Port to listen on."),
    device: str = typer.Option("auto", help="cpu, cuda, cuda:1 ... (auto: GPU if any)."),
    max_new_tokens: int = typer.Option(256, min=1, help="Longest answer in tokens; a larger max_tokens in a request is a 400."),
    max_body_bytes: int = typer.Option(8 * 1024 * 1024, min=1, help="Largest request body in bytes (413 above)."),
    max_questions: int = typer.Option(256, min=1, help="Most questions per /v1/confidence request (413 above)."),
    max_question_chars: int = typer.Option(20_000, min=1, help="Longest question, and chat's last user message, in characters (400 above)."),
    batch_tokens: int = typer.Option(1024, min=1, help="Most (estimated) tokens per confidence pass; larger requests are split into passes that take turns with other requests."),
    docs: bool = typer.Option(False, "--docs", help="Serve /docs, /redoc and /openapi.json."),
) -> None:
    """OpenAI-compatible server: confidence before generation, then answer, retrieve and answer, or abstain."""
    from rich.console import Console

    from elical.core.inputs import check_device

    console = Console()
    with _user_errors(console):
        check_device(device, "--device")
        import uvicorn

        from elical.serve import ServeConfig, build_app
        from elical.serve.setup import exposure_warning

        config = ServeConfig(model_dir, tau=tau, retrieve_below=retrieve_below, corpus=corpus, upstream=upstream,
                             upstream_model=upstream_model, upstream_api_key_env=upstream_api_key_env, device=device,
                             max_new_tokens=max_new_tokens, api_key_env=api_key_env, docs=docs, max_body_bytes=max_body_bytes,
                             max_questions=max_questions, max_question_chars=max_question_chars,
                             batch_tokens=batch_tokens)
        server_app = build_app(config)
    warning = exposure_warning(host, api_key_env, upstream)
    if warning:
        Console(stderr=True).print(warning, style="bold red" if upstream else "yellow", soft_wrap=True, markup=False)
    # idle connections stay open longer than clients keep them (httpx, so the openai SDK: 5 s), so that a client
    # never sends a request on a connection the server is closing (uvicorn's own default is those same 5 s)
    uvicorn.run(server_app, host=host, port=port, log_level="info", timeout_keep_alive=30)

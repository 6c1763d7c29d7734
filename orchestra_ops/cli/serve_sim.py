"""`ops serve sim`: the simulated engine, a vLLM stand-in on the wire (services/simllm)."""

from __future__ import annotations

import logging

import click

from orchestra_ops.errors import ConfigError

_RATE = click.FloatRange(0.0, 1.0)
_NONNEG = click.FloatRange(min=0.0)


@click.command("sim")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(1, 65535), required=True, help="Port to bind.")
@click.option("--model", required=True, help="The served model name (requests must use it).")
@click.option("--max-model-len", type=click.IntRange(min=1), default=32768, show_default=True,
              help="Context length; longer prompts get vLLM's 400.")
@click.option("--latency-ms", type=_NONNEG, default=20.0, show_default=True,
              help="Fixed latency per request.")
@click.option("--prefill-ms-per-token", type=_NONNEG, default=0.0, show_default=True,
              help="Per prompt token its prefix cache did not hold (vLLM computes only those).")
@click.option("--decode-ms-per-token", type=_NONNEG, default=0.0, show_default=True)
@click.option("--decode-slowdown", type=_NONNEG, default=0.0, show_default=True,
              help="Decode time grows by this fraction per other request in flight (a batch slows each step).")
@click.option("--prefix-cache-tokens", type=click.IntRange(min=0), default=65536, show_default=True,
              help="The prefix cache's capacity in tokens (whole 128-token blocks, least recently used out).")
@click.option("--jitter", type=_RATE, default=0.0, show_default=True,
              help="Latency scaled by a uniform factor in [1-jitter, 1+jitter].")
@click.option("--startup-delay-s", type=_NONNEG, default=0.0, show_default=True,
              help="Seconds from process start until the port is bound (imports count toward it).")
@click.option("--fail", "fail_spec", default=None, metavar="STATUS:RATE[,…]",
              help="Injected error rates, e.g. 500:0.05,429:0.02 (429 carries Retry-After).")
@click.option("--malformed-rate", type=_RATE, default=0.0, show_default=True,
              help="Fraction of judge answers that are not valid JSON.")
@click.option("--hang-rate", type=_RATE, default=0.0, show_default=True,
              help="Fraction of requests never answered.")
@click.option("--crash-after", type=click.IntRange(min=1), default=None,
              help="Exit (status 1) right after answering this many chat requests.")
@click.option("--retry-after-s", type=_NONNEG, default=1.0, show_default=True,
              help="The Retry-After of injected 429s.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of faults and jitter.")
@click.option("--enable-lora", is_flag=True, help="Serve LoRA adapters (as vLLM's flag).")
@click.option("--lora-modules", multiple=True, metavar="NAME=PATH|JSON",
              help="A static adapter (repeat per adapter); runtime loads need VLLM_ALLOW_RUNTIME_LORA_UPDATING=1.")
@click.option("--max-lora-rank", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--max-loras", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--enable-prompt-tokens-details", is_flag=True,
              help="usage.prompt_tokens_details with the prefix-cache hits (as vLLM's flag).")
@click.option("--enable-force-include-usage", is_flag=True,
              help="usage on every streamed chunk and a usage chunk at the end (as vLLM's flag).")
def sim(host: str, port: int, model: str, max_model_len: int, latency_ms: float, prefill_ms_per_token: float,
        decode_ms_per_token: float, decode_slowdown: float, prefix_cache_tokens: int, jitter: float,
        startup_delay_s: float, fail_spec: str | None,
        malformed_rate: float, hang_rate: float, crash_after: int | None, retry_after_s: float,
        seed: int, enable_lora: bool, lora_modules: tuple[str, ...], max_lora_rank: int, max_loras: int,
        enable_prompt_tokens_details: bool, enable_force_include_usage: bool) -> None:
    """Serve a simulated OpenAI-compatible model (health, models, chat completions, metrics, LoRA)."""
    from orchestra_ops.services.simllm.config import SimConfig, parse_fail_spec
    from orchestra_ops.services.simllm.lora import runtime_updates_allowed

    try:
        fail = parse_fail_spec(fail_spec)
    except ConfigError as exc:
        raise click.BadParameter(str(exc).removeprefix("--fail: "), param_hint="'--fail'") from exc
    config = SimConfig(model=model, host=host, port=port, max_model_len=max_model_len, latency_ms=latency_ms,
                       prefill_ms_per_token=prefill_ms_per_token, decode_ms_per_token=decode_ms_per_token,
                       decode_slowdown=decode_slowdown, prefix_cache_tokens=prefix_cache_tokens,
                       jitter=jitter, startup_delay_s=startup_delay_s, fail=fail,
                       malformed_rate=malformed_rate, hang_rate=hang_rate, crash_after=crash_after,
                       seed=seed, retry_after_s=retry_after_s, enable_lora=enable_lora,
                       lora_modules=lora_modules, max_lora_rank=max_lora_rank, max_loras=max_loras,
                       runtime_lora=runtime_updates_allowed(),
                       enable_prompt_tokens_details=enable_prompt_tokens_details,
                       enable_force_include_usage=enable_force_include_usage)
    logging.getLogger("orchestra_ops.services.simllm").setLevel(logging.INFO)
    from orchestra_ops.services.simllm.app import serve

    serve(config)

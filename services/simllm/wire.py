"""The shapes of vLLM 0.32's answers, as the simulated engine sends them (held to the real server by
tests/integration/test_sim_conformance.py).

* Errors: ``{"error": {"message", "type", "param", "code"}}``; ``type`` is the exception's name
  (BadRequestError, NotFoundError, ...; "Bad Request" for a body that fails validation); file paths
  in the message are ``<path>`` (``sanitize_message``).
* A chat completion has every key vLLM sends, ``null`` where the sim has nothing to say:
  ``message`` = role, content, refusal, annotations, audio, function_call, tool_calls (only when
  there are calls), reasoning (vLLM's name; never ``reasoning_content``).
* ``usage.prompt_tokens_details`` is null unless ``--enable-prompt-tokens-details``; then
  ``{"cached_tokens", "created_cache_tokens", "multimodal_tokens"}`` (the usage chunk of a stream
  leaves out multimodal_tokens, as vLLM does).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

from aiohttp import web

VLLM_VERSION = "0.32.0"  # the vLLM release whose wire the sim follows (GET /version)
SYSTEM_FINGERPRINT = f"vllm-{VLLM_VERSION}-simllm"
JSON = "application/json"
ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 408: "RequestTimeoutError",
               429: "TooManyRequestsError", 500: "InternalServerError", 502: "BadGatewayError",
               503: "ServiceUnavailableError", 504: "GatewayTimeoutError"}
VALIDATION_ERROR = "Bad Request"  # vLLM's type for a body its request model rejects


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")
_SYSTEM_PATH = re.compile(r"/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[\w.\-]+)+")
_FILE_PATH = re.compile(r"(?:/[\w\-]+)+/[\w\-]+\.\w+")


def sanitize_message(message: str) -> str:
    """vLLM's `sanitize_message` of every error it sends: memory addresses out, and a path under /home,
    /usr, /opt, /var, /tmp, /root, /lib, /mnt or /srv, or any path to a file with an extension, becomes
    `<path>` (so "No adapter found for /tmp/x" reads "No adapter found for <path>")."""
    message = _ADDRESS.sub(">", message)
    message = _SYSTEM_PATH.sub("<path>", message)
    message = _FILE_PATH.sub("<path>", message)
    return message.strip()


def error_response(status: int, message: str, *, param: str | None = None, error_type: str | None = None,
                   headers: dict[str, str] | None = None) -> web.Response:
    """vLLM's error body: `{"error": {"message", "type", "param", "code"}}`, the message sanitized."""
    body = {"error": {"message": sanitize_message(message), "type": error_type or ERROR_TYPES.get(status, "APIError"),
                      "param": param, "code": status}}
    return web.Response(status=status, text=dumps(body), content_type=JSON, headers=headers)


def unknown_model(requested: Any, served: str) -> web.Response:
    return error_response(404, f"The model `{requested}` does not exist. Valid aliases: {served}.", param="model")


def model_card(name: str, root: str, parent: str | None, max_model_len: int | None, created: int) -> dict[str, Any]:
    """One entry of /v1/models, with vLLM's model_permission object."""
    perm = "modelperm-" + hashlib.sha256(f"{name}\n{created}".encode()).hexdigest()[:16]
    return {"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": root,
            "parent": parent, "max_model_len": max_model_len,
            "permission": [{"id": perm, "object": "model_permission", "created": created,
                            "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                            "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                            "organization": "*", "group": None, "is_blocking": False}]}


def prompt_details(cached: int, created: int, *, stream: bool = False) -> dict[str, Any]:
    details: dict[str, Any] = {"cached_tokens": cached, "created_cache_tokens": created}
    if not stream:
        details["multimodal_tokens"] = None
    return details


def usage(n_prompt: int, n_completion: int, details: dict[str, Any] | None) -> dict[str, Any]:
    return {"prompt_tokens": n_prompt, "total_tokens": n_prompt + n_completion, "completion_tokens": n_completion,
            "prompt_tokens_details": details, "completion_tokens_details": None}


def message(content: str, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None, "annotations": None,
                           "audio": None, "function_call": None}
    if tool_calls:
        out["tool_calls"] = tool_calls
    out["reasoning"] = None
    return out


def completion(request_id: str, model: str, msg: dict[str, Any], finish_reason: str,
               usage_body: dict[str, Any]) -> dict[str, Any]:
    return {"id": request_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish_reason,
                         "stop_reason": None, "token_ids": None, "routed_experts": None}],
            "service_tier": None, "system_fingerprint": SYSTEM_FINGERPRINT, "usage": usage_body,
            "prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None, "kv_transfer_params": None,
            "ec_transfer_params": None, "metrics": None}


def sse(obj: Any) -> bytes:
    return b"data: " + dumps(obj).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"

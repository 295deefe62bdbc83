"""A stand-in for the vLLM server that TRL's `AsyncGRPOTrainer` talks to, for machines without vLLM or a GPU.

This is not vLLM. It is the tiny model served by transformers on loopback, answering the HTTP calls TRL 1.16's
async path makes (read from ``trl/experimental/async_grpo/``), with the fields TRL reads:

- the rollout worker (``async_rollout_worker._generate_one_turn``) POSTs ``/v1/completions`` with ``prompt``
  (token ids), ``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``seed``, ``logprobs: 0`` and
  ``return_token_ids: true``, and reads ``choices[0]["token_ids"]`` and
  ``choices[0]["logprobs"]["token_logprobs"]``;
- the trainer's `VLLMClient` GETs ``/health`` (readiness), ``/v1/models`` (``data[0]["max_model_len"]``, the
  default token budget), ``/server_info`` (the dtype) and ``/get_world_size``, and POSTs ``/pause`` and
  ``/resume`` around every weight sync.

Weights reach it through `StandInWeightTransfer`, an implementation of TRL's ``WeightTransferProtocol``
(``init_weight_transfer``, ``pause``, ``send_weights``, ``resume``, ``destroy``) that copies the trainer's
``(name, tensor)`` stream into the served model in-process, where TRL's ``WeightTransferClient`` broadcasts
it over NCCL. What it proves: the trainer's weights reach the server between steps, the worker's requests,
tool loop and scoring work end to end, and each sample's logprobs are the served policy's. What it does not:
vLLM's batching, its sampler's numerics, NCCL, or GPU memory.

With ``script=`` the sampling is scripted, as `ormix.workbench._scripted.ScriptedPolicy` does for the sync
trainer (a random tiny model never emits a tool call): ``script(prompt_text, sample)`` returns the
completion text for a request whose prompt decodes to ``prompt_text``; the token ids are its encoding plus EOS
and the logprobs are still the served model's, computed on those tokens. ``sample`` is the rollout's place in
its GRPO group: it counts earlier requests with the same prompt, modulo ``group_size`` (TRL's
``num_generations``) when given, so it restarts at 0 with each group. TRL's requests carry no group id and a
group may span a weight sync, so the count cannot restart anywhere else; two groups of one prompt sampled at
the same time can interleave.

Sampling: ``temperature`` scales the logits (``0`` is greedy decoding, its logprobs unscaled) and ``seed``
seeds it. ``top_p``, ``top_k``, ``min_p``, ``repetition_penalty`` and ``n`` are not implemented: their
defaults (what TRL sends unless configured otherwise) are accepted, any other value is refused with HTTP
400 naming the parameter, rather than silently sampling from another distribution.

Example:
    >>> from ormix.workbench._vllm_standin import completion_response
    >>> completion_response([5, 7], [-0.1, -0.2])["choices"][0]["token_ids"]
    [5, 7]
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: A scripted policy: (decoded prompt, sample index within identical prompts) -> completion text.
Script = Callable[[str, int], str]

#: Sampling parameters the stand-in does not implement, with the values that mean "off" (vLLM's and TRL's
#: defaults); a request with any other value is refused.
UNSUPPORTED_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "top_p": (None, 1, 1.0),
    "top_k": (None, 0, -1),
    "min_p": (None, 0, 0.0),
    "repetition_penalty": (None, 1, 1.0),
    "n": (None, 1),
}


def check_supported(payload: dict[str, Any]) -> None:
    """Raise ``ValueError`` (answered with HTTP 400) naming the first sampling parameter set to a value the
    stand-in ignores.

    Example:
        >>> check_supported({"temperature": 0.7, "top_p": 1.0, "top_k": 0, "repetition_penalty": 1.0, "n": 1})
        >>> try:
        ...     check_supported({"top_p": 0.9})
        ... except ValueError as e:
        ...     print(str(e)[:48])
        the vLLM stand-in does not implement top_p=0.9 (
    """
    for name, defaults in UNSUPPORTED_DEFAULTS.items():
        value = payload.get(name)
        if value not in defaults or isinstance(value, bool):
            allowed = ", ".join(map(str, defaults))
            raise ValueError(
                f"the vLLM stand-in does not implement {name}={value!r} (it only accepts {allowed}); "
                "leave it at its default or serve the model with vLLM"
            )


def completion_response(
    token_ids: list[int], logprobs: list[float], model: str = "standin"
) -> dict[str, Any]:
    """The body of a ``/v1/completions`` answer, shaped as vLLM's (only what TRL reads is filled in).

    Example:
        >>> completion_response([1], [-0.5])["choices"][0]["logprobs"]["token_logprobs"]
        [-0.5]
    """
    return {
        "object": "text_completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "text": "",
                "token_ids": list(token_ids),
                "logprobs": {"token_logprobs": list(logprobs)},
                "finish_reason": "stop",
            }
        ],
    }


class VLLMStandIn:
    """The tiny model behind a vLLM-shaped HTTP API on ``127.0.0.1`` (see the module docstring).

    Args:
        model_path: a transformers checkpoint directory (``ormix.workbench._tiny.build_tiny_model()``).
        script: optional scripted sampling (see the module docstring).
        max_model_len: what ``/v1/models`` reports (TRL's default token budget).
        group_size: the GRPO group size (``num_generations``); a script's ``sample`` counts modulo it.

    Use as a context manager, or `start` / `stop`; ``url`` is the base URL to give TRL.
    """

    def __init__(
        self,
        model_path: str,
        *,
        script: Script | None = None,
        max_model_len: int = 2048,
        group_size: int | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_path = str(model_path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32)
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in eos_ids:
            eos_ids.insert(0, self.tokenizer.eos_token_id)
        self.eos_ids = eos_ids
        self.script = script
        self.max_model_len = int(max_model_len)
        if group_size is not None and group_size < 1:
            raise ValueError(f"group_size must be at least 1 (TRL's num_generations), got {group_size}")
        self.group_size = group_size
        self.lock = threading.Lock()  # one request at a time uses the model; a weight load waits for it
        self.paused = threading.Event()
        self.weight_loads = 0
        self.requests = 0
        self._seen: Counter[str] = Counter()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ── lifecycle ─────────────────────────────────────────────────────

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:<port>``)."""
        assert self._server is not None, "start() the stand-in first"
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def start(self) -> VLLMStandIn:
        """Serve on a free loopback port, in a daemon thread."""
        standin = self

        class Handler(_Handler):
            owner = standin

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="vllm-standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> VLLMStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ── what the endpoints do ─────────────────────────────────────────

    def complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Answer one ``/v1/completions`` request (token ids in, token ids and their logprobs out)."""
        import torch

        check_supported(payload)
        prompt = [int(t) for t in payload["prompt"]]
        max_tokens = int(payload.get("max_tokens") or 16)
        temperature = payload.get("temperature")
        # 0 is greedy decoding (vLLM's meaning), not "unset".
        temperature = 1.0 if temperature is None else float(temperature)
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 is greedy decoding), got {temperature}")
        seed = int(payload.get("seed") or 0) % (2**63)
        with self.lock:
            self.requests += 1
            if self.script is not None:
                text = str(self.tokenizer.decode(prompt))
                sample = self._seen[text]
                self._seen[text] = (sample + 1) % self.group_size if self.group_size else sample + 1
                out = self.tokenizer.encode(self.script(text, sample), add_special_tokens=False)
                out = out[: max(0, max_tokens - 1)] + self.eos_ids[:1]
                logprobs = self._score(prompt, out, temperature)
            else:
                out, logprobs = self._sample(
                    prompt, max_tokens, temperature, torch.Generator().manual_seed(seed)
                )
        return completion_response(out, logprobs, model=str(payload.get("model") or "standin"))

    def _score(self, prompt: list[int], out: list[int], temperature: float) -> list[float]:
        import torch

        with torch.no_grad():
            logits = self.model(torch.tensor([prompt + out])).logits[0, len(prompt) - 1 : -1]
            logp = torch.log_softmax(logits.float() / (temperature or 1.0), dim=-1)
            return [float(v) for v in logp.gather(1, torch.tensor(out)[:, None])[:, 0]]

    def _sample(
        self, prompt: list[int], max_tokens: int, temperature: float, generator: Any
    ) -> tuple[list[int], list[float]]:
        import torch

        out: list[int] = []
        logprobs: list[float] = []
        with torch.no_grad():
            result = self.model(torch.tensor([prompt]), use_cache=True)
            for _ in range(max_tokens):
                logp = torch.log_softmax(result.logits[0, -1].float() / (temperature or 1.0), dim=-1)
                if temperature == 0:
                    token = int(torch.argmax(logp))
                else:
                    token = int(torch.multinomial(logp.exp(), 1, generator=generator))
                out.append(token)
                logprobs.append(float(logp[token]))
                if token in self.eos_ids:
                    break
                result = self.model(
                    torch.tensor([[token]]), past_key_values=result.past_key_values, use_cache=True
                )
        return out, logprobs

    def load_weights(self, weights: Iterator[tuple[str, Any]]) -> int:
        """Copy ``(name, tensor)`` pairs (TRL's weight stream, base-checkpoint names) into the served model;
        returns how many it loaded. Raises `KeyError` for a name the model does not have."""
        import torch

        params = dict(self.model.named_parameters())
        n = 0
        with self.lock, torch.no_grad():
            for name, tensor in weights:
                params[name].copy_(tensor.detach().to(params[name].dtype))
                n += 1
            self.weight_loads += 1
        return n

    def info(self, path: str) -> dict[str, Any] | None:
        if path == "/v1/models":
            return {"object": "list", "data": [{"id": self.model_path, "max_model_len": self.max_model_len}]}
        if path == "/server_info":
            dtype = str(next(self.model.parameters()).dtype)
            return {
                "vllm_config": {
                    "model_config": {"dtype": dtype},
                    "lora_config": None,
                    "parallel_config": {"data_parallel_size": 1},
                }
            }
        if path == "/get_world_size":
            return {"world_size": 1}
        if path == "/health":
            return {}
        return None


class _Handler(BaseHTTPRequestHandler):
    owner: VLLMStandIn
    protocol_version = "HTTP/1.1"  # aiohttp keeps connections alive

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = self.owner.info(self.path.split("?")[0])
        self._reply(200, body) if body is not None else self._reply(404, {"error": self.path})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        if path == "/v1/completions":
            try:
                self._reply(200, self.owner.complete(payload))
            except ValueError as e:  # a request asking for what the stand-in does not do
                self._reply(400, {"error": str(e)})
            except Exception as e:  # noqa: BLE001 - said to the client, as a server would
                self._reply(500, {"error": f"{type(e).__name__}: {e}"})
        elif path == "/pause":
            self.owner.paused.set()
            self._reply(200, {})
        elif path == "/resume":
            self.owner.paused.clear()
            self._reply(200, {})
        else:
            self._reply(404, {"error": path})


class StandInWeightTransfer:
    """TRL's ``WeightTransferProtocol`` for a `VLLMStandIn` in the trainer's process: the weight stream is
    copied into the served model (TRL's own client broadcasts it over NCCL to vLLM's workers).

    Example:
        >>> StandInWeightTransfer.__name__
        'StandInWeightTransfer'
    """

    def __init__(self, standin: VLLMStandIn) -> None:
        self.standin = standin
        self.syncs = 0
        self.loaded = 0

    def init_weight_transfer(self) -> None:
        pass  # nothing to set up: no process group

    def pause(self) -> None:
        self.standin.paused.set()

    def send_weights(self, iterator: Iterator[tuple[str, Any]]) -> None:
        self.loaded = self.standin.load_weights(iterator)
        self.syncs += 1

    def resume(self) -> None:
        self.standin.paused.clear()

    def destroy(self) -> None:
        pass
